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
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

func get(t *testing.T, url string) (string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
	return string(body), resp.Header
}

func TestPage(t *testing.T) {
	s := startSource(t, fixture(t))
	explain(t, s)
	srv := httptest.NewServer(NewHandler(s, HandlerOptions{Explain: 10}))
	defer srv.Close()

	body, hdr := get(t, srv.URL+"/")
	assert.Equal(t, contentSecurityPolicy, hdr.Get("Content-Security-Policy"))
	assert.NotContains(t, hdr.Get("Content-Security-Policy"), "unsafe-inline")
	assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
	assert.Contains(t, body, `<script src="/assets/app.js" defer></script>`)
	assert.NotRegexp(t, `<script>|style="|https?://`, body, "no inline script or style, nothing from elsewhere")
	// The GPUs, drawn open (two nodes), with their claims and bars.
	assert.Contains(t, body, `data-gpu="node-a/gpu-0"`)
	assert.Contains(t, body, `data-gpu="node-a/gpu-1"`)
	assert.Contains(t, body, `data-gpu="node-m/gpu-0"`)
	assert.Contains(t, body, `<details class="node" data-node="node-a" open>`)
	assert.Contains(t, body, `aria-label="memory: 11Gi used, 12Gi booked, 2Gi burst of 16Gi"`)
	assert.Contains(t, body, `aria-label="cores: 70 booked of 100"`)
	assert.Contains(t, body, `<tr data-claim="team-b/notebook"><td>team-b</td><td>notebook</td><td>notebook</td><td>whole GPU</td>`)
	assert.Regexp(t, `data-claim="team-b/notebook">.*<td>4Gi</td><td>12Gi</td><td>2Gi</td><td>5Gi</td><td>3</td><td>20</td></tr>`, body)
	// The used part of a booking and the idle part are different segments.
	assert.Regexp(t, `aria-label="team-a/train: 6Gi used of a 8Gi guarantee, 0 burst, limit 8Gi"><title>[^<]*</title><rect class="free" width="100%" height="100%"/><rect class="used" x="0.00%" width="75.00%" height="100%"/><rect class="idle" x="75.00%" width="25.00%" height="100%"/>`, body)
	// The MIG GPU, its instance on its slice with the claim inside.
	assert.Contains(t, body, `MIG mode`)
	assert.Regexp(t, `<div class="inst c4 w1" data-instance="[^"]+"><strong>1g.18gb</strong> dynamic<br>team-a/mig-small</div>`, body)
	// The Pending pod and why.
	assert.Contains(t, body, `data-pod="team-b/big"`)
	assert.Contains(t, body, "The pod&#39;s vGPU claims fit on none of 2 nodes.")
	assert.Contains(t, body, "memory: asks 14Gi, 4Gi left of 16Gi")
	assert.NotContains(t, body, "team-c")

	// Filters: by namespace and by node, as the fragment the script fetches.
	frag, _ := get(t, srv.URL+"/fragment?ns=team-a")
	assert.NotContains(t, frag, "<html")
	assert.NotContains(t, frag, `data-claim="team-b/notebook"`)
	assert.Contains(t, frag, `data-claim="team-a/train"`)
	assert.NotContains(t, frag, `data-pod="team-b/big"`)
	frag, _ = get(t, srv.URL+"/fragment?node=node-m")
	assert.NotContains(t, frag, `data-node="node-a"`)
	assert.Contains(t, frag, `data-node="node-m"`)

	js, hdr := get(t, srv.URL+"/assets/app.js")
	assert.Contains(t, hdr.Get("Content-Type"), "javascript")
	assert.Contains(t, js, "new EventSource('/events')")
	_, hdr = get(t, srv.URL+"/assets/style.css")
	assert.Contains(t, hdr.Get("Content-Type"), "text/css")
}

func TestPageCollapsesManyNodes(t *testing.T) {
	m := &Model{}
	for i := range expandAll + 1 {
		m.Nodes = append(m.Nodes, Node{Name: fmt.Sprintf("node-%03d", i), MemoryCapacity: 16 * gi})
	}
	srv := httptest.NewServer(NewHandler(fixed{m}, HandlerOptions{}))
	defer srv.Close()
	body, _ := get(t, srv.URL+"/")
	assert.Contains(t, body, `<details class="node" data-node="node-000">`, "closed")
	assert.Contains(t, body, "Loading its GPUs")
	body, _ = get(t, srv.URL+"/fragment?open=node-003")
	assert.Contains(t, body, `<details class="node" data-node="node-003" open>`)
	assert.Contains(t, body, `<details class="node" data-node="node-004">`)
}

// fixed serves one model.
type fixed struct{ m *Model }

func (f fixed) Current() (*Model, uint64, <-chan struct{}) { return f.m, 1, make(chan struct{}) }

func TestOnlyLoopbackNames(t *testing.T) {
	srv := httptest.NewServer(NewHandler(fixed{&Model{}}, HandlerOptions{}))
	defer srv.Close()
	for host, want := range map[string]int{"evil.example": http.StatusForbidden, "localhost": http.StatusOK, "127.0.0.1": http.StatusOK} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/", nil)
		require.NoError(t, err)
		req.Host = host + ":" + strings.Split(srv.Listener.Addr().String(), ":")[1]
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, host)
	}
	resp, err := http.Post(srv.URL+"/", "text/plain", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestUpdateStream follows the update stream while a pod is deleted: a new
// model event comes, and the fragment fetched then no longer shows it.
func TestUpdateStream(t *testing.T) {
	client := fixture(t)
	s := startSource(t, client)
	waitFor(t, s, built)
	srv := httptest.NewServer(NewHandler(s, HandlerOptions{}))
	defer srv.Close()

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := bufio.NewReader(resp.Body)
	next := func() string {
		t.Helper()
		var data string
		for {
			line, err := events.ReadString('\n')
			require.NoError(t, err)
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = strings.TrimSpace(d)
			}
			if line == "\n" && data != "" {
				return data
			}
		}
	}
	first := next()
	frag, _ := get(t, srv.URL+"/fragment")
	assert.Contains(t, frag, `data-pod="team-b/big"`)
	// The fragment is of the announced model or a later one (the pod's
	// explanation, worked out in the background, may have come since).
	assert.GreaterOrEqual(t, fragmentVersion(t, frag), atoiT(t, first))

	require.NoError(t, client.CoreV1().Pods("team-b").Delete(t.Context(), "big", metav1.DeleteOptions{}))
	for {
		v := next()
		require.NotEqual(t, first, v)
		frag, _ = get(t, srv.URL+"/fragment")
		if !strings.Contains(frag, `data-pod="team-b/big"`) {
			break
		}
	}
	assert.Regexp(t, regexp.MustCompile(`<span id="t-pending">0 Pending pods</span>`), frag)
}

func fragmentVersion(t *testing.T, frag string) int {
	t.Helper()
	m := regexp.MustCompile(`data-version="(\d+)"`).FindStringSubmatch(frag)
	require.NotNil(t, m, "the fragment carries its model's version")
	return atoiT(t, m[1])
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "version %q", s)
	return n
}

// asked records the pods a page asks to have explained.
type asked struct {
	fixed
	keys []string
}

func (a *asked) Explain(keys ...string) { a.keys = append(a.keys, keys...) }

// pendingModel has n Pending pods, team/pod-000 to pod-<n-1>; the first
// is explained.
func pendingModel(n int) *Model {
	m := &Model{Namespaces: []string{"team"}}
	for i := range n {
		m.Pending = append(m.Pending, PendingPod{Namespace: "team", Name: fmt.Sprintf("pod-%03d", i), Claims: []string{"gpu"}})
	}
	m.Pending[0].Why = &inspect.Explanation{Summary: "The pod's vGPU claims fit on none of 1 node."}
	return m
}

// A page draws the first Pending pods open and asks for their
// explanations; the rest are a count until listed, and each of those is
// one line until opened.
func TestPageCollapsesManyPendingPods(t *testing.T) {
	models := &asked{fixed: fixed{pendingModel(30)}}
	srv := httptest.NewServer(NewHandler(models, HandlerOptions{Explain: 3}))
	defer srv.Close()

	body, _ := get(t, srv.URL+"/")
	assert.Contains(t, body, `<span id="t-pending">30 Pending pods</span>`)
	assert.Contains(t, body, `<details class="pod" data-pod="team/pod-000" open>`)
	assert.Contains(t, body, "fit on none of 1 node")
	assert.Contains(t, body, `<details class="pod" data-pod="team/pod-002" open>`)
	assert.Regexp(t, `data-pod="team/pod-001" open>\n<summary>.*</summary>\n<p class="why explaining">Explaining…`, body, "not worked out yet")
	assert.NotContains(t, body, `data-pod="team/pod-003"`)
	assert.Contains(t, body, "27 more Pending pods")
	assert.Equal(t, []string{"team/pod-000", "team/pod-001", "team/pod-002"}, models.keys)

	models.keys = nil
	body, _ = get(t, srv.URL+"/fragment?pending=all&why=team/pod-007")
	assert.Contains(t, body, `<details class="pod" data-pod="team/pod-029">`, "listed, closed")
	assert.Contains(t, body, `<details class="pod" data-pod="team/pod-007" open>`, "opened by the user")
	assert.Equal(t, []string{"team/pod-000", "team/pod-001", "team/pod-002", "team/pod-007"}, models.keys)
}

// A Pending pod whose explanation failed says why in place of it.
func TestPageShowsExplanationError(t *testing.T) {
	m := pendingModel(2)
	m.Pending[1].WhyError = "Working this out took longer than 20s"
	srv := httptest.NewServer(NewHandler(fixed{m}, HandlerOptions{}))
	defer srv.Close()
	body, _ := get(t, srv.URL+"/")
	assert.Contains(t, body, `<p class="why error">Working this out took longer than 20s</p>`)
}

// A browser gets the page gzipped; a client that does not ask gets it
// plain.
func TestPageGzipped(t *testing.T) {
	srv := httptest.NewServer(NewHandler(fixed{pendingModel(3)}, HandlerOptions{}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	assert.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(resp.Body)
	require.NoError(t, err)
	body, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Contains(t, string(body), `data-pod="team/pod-000"`)

	plain, hdr := get(t, srv.URL+"/fragment")
	assert.Empty(t, hdr.Get("Content-Encoding"), "Go's client asks for gzip only when it decodes it itself")
	assert.Contains(t, plain, `data-pod="team/pod-000"`)
}

// Each GPU's card names its mode, and MPS claims are listed under their
// GPU.
func TestPageShowsGPUModes(t *testing.T) {
	srv := httptest.NewServer(NewHandler(fixed{Build(mpsSnapshot())}, HandlerOptions{}))
	defer srv.Close()
	body, _ := get(t, srv.URL+"/")
	assert.Regexp(t, `data-gpu="node-p/gpu-0">\n<h3>.*<span class="mode mode-MPS">MPS</span>`, body)
	assert.Regexp(t, `data-gpu="node-p/gpu-1">\n<h3>.*<span class="mode mode-time-sliced">time-sliced</span>`, body)
	assert.Regexp(t, `data-gpu="node-p/gpu-2">\n<h3>.*<span class="mode mode-free">free</span>`, body)
	assert.Contains(t, body, `<tr data-claim="team-a/mps-a"><td>team-a</td><td>mps-a</td><td>mps-a</td><td>MPS</td>`)
	assert.NotContains(t, body, `data-gpu="node-p/gpu-0-mps"`)
	assert.Contains(t, body, `<span id="t-claims">3 claims</span>`)
}

// While claims and pods are listed the page says so above the GPUs.
func TestPageWhileListing(t *testing.T) {
	m := Build(mpsSnapshot())
	m.Listing = true
	srv := httptest.NewServer(NewHandler(fixed{m}, HandlerOptions{}))
	defer srv.Close()
	body, _ := get(t, srv.URL+"/")
	assert.Contains(t, body, "Listing claims and pods…")
	assert.Contains(t, body, `data-gpu="node-p/gpu-0"`)
	assert.NotContains(t, body, "Listing the cluster")
}
