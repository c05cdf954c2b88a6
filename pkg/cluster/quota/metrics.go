/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package quota

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
)

var (
	memoryLimitDesc = prometheus.NewDesc("vgpu_dra_quota_memory_limit_bytes",
		"GPU memory quota of the namespace (annotation "+AnnotationMemory+").", []string{"namespace"}, nil)
	memoryUsedDesc = prometheus.NewDesc("vgpu_dra_quota_memory_used_bytes",
		"GPU memory charged to the namespace's quota by its existing claims.", []string{"namespace"}, nil)
	coresLimitDesc = prometheus.NewDesc("vgpu_dra_quota_cores_limit",
		"GPU cores quota of the namespace in percent of one GPU (annotation "+AnnotationCores+").", []string{"namespace"}, nil)
	coresUsedDesc = prometheus.NewDesc("vgpu_dra_quota_cores_used",
		"GPU cores charged to the namespace's quota by its existing claims, in percent of one GPU.", []string{"namespace"}, nil)
	invalidDesc = prometheus.NewDesc("vgpu_dra_quota_invalid",
		"1 when the namespace's quota annotations cannot be parsed; its claims are then refused.", []string{"namespace"}, nil)
)

// Collector exports limit and use of every namespace with a quota,
// computed from informer caches at scrape time.
type Collector struct {
	Namespaces corelisters.NamespaceLister
	Claims     resourcelisters.ResourceClaimLister
	Charger    Charger
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{memoryLimitDesc, memoryUsedDesc, coresLimitDesc, coresUsedDesc, invalidDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	namespaces, err := c.Namespaces.List(labels.Everything())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(memoryLimitDesc, err)
		return
	}
	for _, ns := range namespaces {
		limits, err := LimitsOf(ns)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(invalidDesc, prometheus.GaugeValue, 1, ns.Name)
			continue
		}
		if limits.Unlimited() {
			continue
		}
		claims, err := c.Claims.ResourceClaims(ns.Name).List(labels.Everything())
		if err != nil {
			ch <- prometheus.NewInvalidMetric(memoryUsedDesc, err)
			continue
		}
		var used Usage
		for _, claim := range claims {
			// Collect has no context; sizing is local and bounded.
			if u, err := c.Charger.Charge(context.Background(), &claim.Spec); err == nil {
				used = used.Add(u)
			}
		}
		ch <- prometheus.MustNewConstMetric(invalidDesc, prometheus.GaugeValue, 0, ns.Name)
		if limits.MemoryBytes != nil {
			ch <- prometheus.MustNewConstMetric(memoryLimitDesc, prometheus.GaugeValue, float64(*limits.MemoryBytes), ns.Name)
			ch <- prometheus.MustNewConstMetric(memoryUsedDesc, prometheus.GaugeValue, float64(used.MemoryBytes), ns.Name)
		}
		if limits.Cores != nil {
			ch <- prometheus.MustNewConstMetric(coresLimitDesc, prometheus.GaugeValue, float64(*limits.Cores), ns.Name)
			ch <- prometheus.MustNewConstMetric(coresUsedDesc, prometheus.GaugeValue, float64(used.Cores), ns.Name)
		}
	}
}
