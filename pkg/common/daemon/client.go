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

package daemon

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/version"
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

// AddFlags registers --kubeconfig, --kube-api-qps and --kube-api-burst with
// the current values as defaults.
func (o *KubeClientOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Empty uses the in-cluster service account.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Queries per second to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries to the API server.")
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
