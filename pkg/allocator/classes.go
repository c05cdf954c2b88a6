package allocator

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// ClassLister adapts an informer's DeviceClass lister to the structured
// allocator.
func ClassLister(l resourcelisters.DeviceClassLister) structured.DeviceClassLister {
	return classLister{l}
}

type classLister struct {
	l resourcelisters.DeviceClassLister
}

func (c classLister) List() ([]*resourceapi.DeviceClass, error) { return c.l.List(labels.Everything()) }
func (c classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	return c.l.Get(name)
}
