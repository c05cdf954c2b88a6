package webhook

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
)

// ClassMatcher decides which DeviceClasses allocate this driver's GPUs:
// those named explicitly, and those an administrator created whose
// selector requires this driver or whose config targets it.
type ClassMatcher struct {
	DriverName string
	Names      sets.Set[string]
	// Classes may be nil; then only Names match.
	Classes resourcelisters.DeviceClassLister
}

// IsOurs reports whether name is one of this driver's classes.
func (m *ClassMatcher) IsOurs(name string) bool {
	if m.Names.Has(name) {
		return true
	}
	if m.Classes == nil {
		return false
	}
	class, err := m.Classes.Get(name)
	if err != nil {
		return false
	}
	driverSelector := "device.driver == " + strconv.Quote(m.DriverName)
	for _, s := range class.Spec.Selectors {
		if s.CEL != nil && strings.Contains(s.CEL.Expression, driverSelector) {
			return true
		}
	}
	for _, c := range class.Spec.Config {
		if c.Opaque != nil && c.Opaque.Driver == m.DriverName {
			return true
		}
	}
	return false
}
