package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// newClient connects with a rate limit far above what the control plane
// can take, so that the benchmark itself never is the bottleneck.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		return nil, fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.UserAgent = "vgpu-scale-bench"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}
