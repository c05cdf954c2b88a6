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
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/webview"
)

// browserCommand is the command that opens a URL in the user's browser.
func browserCommand(url string) *exec.Cmd {
	switch runtime.GOOS {
	case "darwin":
		return exec.Command("open", url)
	case "windows":
		return exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		return exec.Command("xdg-open", url)
	}
}

// uiMemoryLimit is the Go runtime's soft memory limit while ui runs. At a
// thousand nodes of 8 GPUs with ten thousand pods its informers and model
// hold about 70 MiB; each rebuild of the model, each page and each
// explanation (the allocator over every node) add tens of MiB of
// short-lived objects, which the default GOGC=100 would let grow the heap
// to twice what is live. The binary's own pages add about 55 MiB to the
// process's resident memory, so that with this limit it stays under 200
// MiB.
const uiMemoryLimit = 100 << 20

// softMemoryLimit sets the runtime's soft memory limit unless the user
// set GOMEMLIMIT, and returns the limit in effect.
func softMemoryLimit(limit int64) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// gcPacingOff turns the garbage collector's proportional pacing (GOGC)
// off, unless the user set GOGC, until restore: while ui lists the
// cluster the heap only grows, and collecting at each doubling from a few
// MiB would spend a fifth of the CPU before the first page on it. The
// soft memory limit still bounds the heap.
func gcPacingOff() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	percent := debug.SetGCPercent(-1)
	return func() { debug.SetGCPercent(percent) }
}

// waitListed returns when source has listed the whole cluster (its model
// is no longer marked Listing), or when ctx ends.
func waitListed(ctx context.Context, source *webview.Source) {
	for {
		m, _, updated := source.Current()
		if m != nil && !m.Listing {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		}
	}
}

// withProfiles serves Go's profiles (heap, CPU, goroutines) under
// /debug/pprof/ and the page everywhere else.
func withProfiles(page http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", page)
	return mux
}

func (o *options) uiCommand() *cobra.Command {
	var (
		port     int
		open     bool
		explain  int
		profiles bool
	)
	c := &cobra.Command{
		Use:   "ui",
		Short: "A live web page of every GPU, its slices, MIG instances and claims, and why pods wait (on 127.0.0.1)",
		Long: "ui serves a web page on 127.0.0.1 that shows every node and GPU of the driver with the\n" +
			"memory booked, used and granted as burst against capacity, the cores booked, the MIG\n" +
			"instances, every claim with its use, and the Pending pods that ask for vGPUs with the\n" +
			"explanation of `kubectl vgpu why`. It watches the cluster with your kubeconfig and the\n" +
			"page follows every change without reloading. It writes nothing to the cluster and\n" +
			"answers only on this machine. Ctrl-C stops it.",
		Example: "  kubectl vgpu ui --open\n" +
			"  kubectl vgpu ui --port 8008",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port %d: must be 0 (any free port) to 65535", port)
			}
			if explain < 1 {
				return fmt.Errorf("--explain %d: must be at least 1", explain)
			}
			client, err := o.client()
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("--port %d: %w", port, err)
			}
			url := "http://" + ln.Addr().String() + "/"
			softMemoryLimit(uiMemoryLimit)
			source := webview.NewSource(client, webview.SourceOptions{})
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			g, ctx := errgroup.WithContext(ctx)
			handler := webview.NewHandler(source, webview.HandlerOptions{Explain: explain})
			if profiles {
				handler = withProfiles(handler)
			}
			server := &http.Server{
				Handler:           handler,
				ReadHeaderTimeout: 10 * time.Second,
				// The update streams never go idle: they end with ctx, so
				// that Shutdown does not wait for them.
				BaseContext: func(net.Listener) context.Context { return ctx },
			}
			restoreGC := gcPacingOff()
			g.Go(func() error { return source.Run(ctx) })
			g.Go(func() error {
				waitListed(ctx, source)
				restoreGC()
				return nil
			})
			g.Go(func() error {
				if err := server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
					return fmt.Errorf("serve %s: %w", url, err)
				}
				return nil
			})
			g.Go(func() error {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return server.Shutdown(shutdown)
			})
			if _, err := fmt.Fprintf(o.streams.Out, "Serving the vGPU fleet on %s (Ctrl-C stops)\n", url); err != nil {
				return err
			}
			if open {
				if err := browserCommand(url).Start(); err != nil {
					if _, err := fmt.Fprintf(o.streams.ErrOut, "--open: %v; open %s yourself\n", err, url); err != nil {
						return err
					}
				}
			}
			return g.Wait()
		},
	}
	c.Flags().IntVar(&port, "port", 8008, "Port on 127.0.0.1 to serve on (0: any free port)")
	c.Flags().BoolVar(&open, "open", false, "Open the page in the default browser")
	c.Flags().BoolVar(&profiles, "debug-pprof", false, "Serve Go's profiles under /debug/pprof/ beside the page (for the project's developers)")
	// A developer's switch, not the users'.
	_ = c.Flags().MarkHidden("debug-pprof")
	c.Flags().IntVar(&explain, "explain", 10, "Draw the first N Pending pods open with why they wait; the others are listed on demand and explained when opened (each explanation runs the allocator over every node)")
	return c
}
