package daemon

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/version"
)

// KubeClientOptions selects and tunes the API server connection.
type KubeClientOptions struct {
	// Kubeconfig is a kubeconfig path; empty uses the pod's service account.
	Kubeconfig string
	QPS        float32
	Burst      int
	// Component names the client in the API server's audit log and metrics.
	Component string
}

// NewKubeClient connects to the API server.
func NewKubeClient(o KubeClientOptions) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (--kubeconfig %q): %w", o.Kubeconfig, err)
	}
	cfg.QPS = o.QPS
	cfg.Burst = o.Burst
	cfg.UserAgent = "vgpu-" + o.Component + "/" + version.Version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}
