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

package webview

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

//go:embed assets templates
var files embed.FS

// Models is what the handler serves: Source, or a fixed model in tests.
type Models interface {
	// Current returns the current model (nil before the first), its
	// version and a channel closed when a newer one is published.
	Current() (*Model, uint64, <-chan struct{})
}

// Explainer works out, in the background, the explanations of the
// Pending pods (namespace/name) a page shows; the models published after
// carry them. Source is one.
type Explainer interface {
	Explain(keys ...string)
}

// HandlerOptions tune the handler.
type HandlerOptions struct {
	// Explain is the number of Pending pods drawn open with their
	// explanation (default 10); the others are counted, listed on demand
	// and explained when the user opens one.
	Explain int
	// Keepalive is the interval of comments on an idle update stream
	// (default 15s), so that proxies and browsers keep it open.
	Keepalive time.Duration
}

type handler struct {
	models Models
	opts   HandlerOptions
	tmpl   *template.Template
	assets http.Handler
}

// contentSecurityPolicy allows the page only its own script, stylesheet
// and update stream: no inline script or style, nothing from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// NewHandler serves the page (/), its live part alone (/fragment), the
// update stream (/events) and the embedded assets (/assets/).
func NewHandler(models Models, opts HandlerOptions) http.Handler {
	if opts.Keepalive <= 0 {
		opts.Keepalive = 15 * time.Second
	}
	if opts.Explain <= 0 {
		opts.Explain = 10
	}
	tmpl := template.Must(template.New("").Funcs(template.FuncMap{
		"bytes": inspect.FormatBytes,
		"optBytes": func(v *int64) string {
			if v == nil {
				return "-"
			}
			return inspect.FormatBytes(*v)
		},
		"optInt": func(v *int64) string {
			if v == nil {
				return "-"
			}
			return fmt.Sprint(*v)
		},
	}).ParseFS(files, "templates/*.html"))
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	h := &handler{models: models, opts: opts, tmpl: tmpl, assets: http.StripPrefix("/assets/", http.FileServerFS(assets))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { h.render(w, r, "page") })
	mux.HandleFunc("GET /fragment", func(w http.ResponseWriter, r *http.Request) { h.render(w, r, "fragment") })
	mux.HandleFunc("GET /events", h.events)
	mux.Handle("GET /assets/", h.assets)
	return loopbackOnly(securityHeaders(mux))
}

// loopbackOnly answers only requests addressed to the loopback names, so
// that a web site cannot reach the page through a DNS name of its own that
// resolves to 127.0.0.1 (DNS rebinding).
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		switch host {
		case "127.0.0.1", "localhost", "::1":
			next.ServeHTTP(w, r)
		default:
			http.Error(w, "kubectl vgpu ui answers requests to 127.0.0.1 and localhost only", http.StatusForbidden)
		}
	})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
		hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
		hdr.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// render writes the page or its fragment for the request's filter
// (parameters ns and node), open nodes and Pending pods (open and why,
// comma-separated) and whether all Pending pods are listed (pending=all);
// it asks the explainer for the Pending pods it draws open.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string) {
	q := r.URL.Query()
	m, version, _ := h.models.Current()
	p := &page{Filter: Filter{Namespace: q.Get("ns"), Node: q.Get("node")}, Open: q.Get("open"), Why: q.Get("why"),
		AllPending: q.Get("pending") == "all", Version: version}
	if m == nil {
		p.Loading = true
	} else {
		shown := p.fill(m, openSet(p.Open), openSet(p.Why), h.opts.Explain)
		if e, ok := h.models.(Explainer); ok && len(shown) > 0 {
			e.Explain(shown...)
		}
	}
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, p); err != nil {
		klog.FromContext(r.Context()).Error(err, "Render the page", "template", name)
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r) {
		_, _ = w.Write(buf.Bytes())
		return
	}
	// The summary lines of a thousand nodes repeat themselves: gzip
	// sends them in a tenth of the bytes.
	w.Header().Set("Content-Encoding", "gzip")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level cannot fail
	_, _ = zw.Write(buf.Bytes())
	_ = zw.Close()
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, enc := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(enc), ";")
		if strings.TrimSpace(name) == "gzip" && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// events is the update stream (server-sent events): a "model" event with
// the model's version now and after every change; the page then fetches
// its fragment.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, version, updated := h.models.Current()
	send := func(format string, args ...any) bool {
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 2000\nevent: model\ndata: %d\n\n", version) {
		return
	}
	keepalive := time.NewTicker(h.opts.Keepalive)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			if !send(": keepalive\n\n") {
				return
			}
		case <-updated:
			_, version, updated = h.models.Current()
			if !send("event: model\ndata: %d\n\n", version) {
				return
			}
		}
	}
}
