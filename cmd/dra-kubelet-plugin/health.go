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

package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// socketProbe checks the two gRPC services the kubelet depends on by calling
// them the way the kubelet does: GetInfo on the registration socket and an
// empty NodePrepareResources on the DRA socket. A listening socket is not
// enough: a wedged server (stuck lock, dead goroutine) must fail liveness.
type socketProbe struct {
	registrarSocket string
	draSocket       string
	timeout         time.Duration
}

func (p socketProbe) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	regConn, err := dialUnix(p.registrarSocket)
	if err != nil {
		return fmt.Errorf("registration socket %s: %w", p.registrarSocket, err)
	}
	defer regConn.Close() //nolint:errcheck // closing a client connection
	info, err := registerapi.NewRegistrationClient(regConn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("registration GetInfo on %s: %w", p.registrarSocket, err)
	}
	if info.GetName() != names.DriverName {
		return fmt.Errorf("registration socket %s serves driver %q, want %q", p.registrarSocket, info.GetName(), names.DriverName)
	}

	draConn, err := dialUnix(p.draSocket)
	if err != nil {
		return fmt.Errorf("DRA socket %s: %w", p.draSocket, err)
	}
	defer draConn.Close() //nolint:errcheck // closing a client connection
	if _, err := drapb.NewDRAPluginClient(draConn).NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{}); err != nil {
		return fmt.Errorf("empty NodePrepareResources on %s: %w", p.draSocket, err)
	}
	return nil
}

func dialUnix(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// healthzHandler answers 200 when the probe passes and 503 with the reason
// otherwise; the DaemonSet's liveness and readiness probes point here.
func healthzHandler(probe socketProbe) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := probe.check(r.Context()); err != nil {
			klog.FromContext(r.Context()).V(2).Info("Health check failed", "err", err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	}
}
