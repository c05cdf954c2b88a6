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

package burstnode

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstsock"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstgrant"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

func grantsInFile(t *testing.T, c prepare.PreparedClaim) map[string]uint64 {
	t.Helper()
	data, err := os.ReadFile(c.BurstPath)
	require.NoError(t, err)
	g, err := burstfile.Parse(data)
	require.NoError(t, err)
	return g
}

func TestProtocol(t *testing.T) {
	e := newEnv(t)
	a := preparedClaim(t, e.root, uidA, "a", map[string][2]uint64{gpuA: {4 * gib, 12 * gib}, gpuB: {gib, gib}})
	b := preparedClaim(t, e.root, uidB, "b", map[string][2]uint64{gpuA: {5 * gib, 6 * gib}})
	require.NoError(t, e.node.Start(e.ctx, []prepare.PreparedClaim{a, b}))

	assert.Equal(t, fmt.Sprintf("granted %d\n", chunk), ask(t, a, "grow "+gpuA+" 1\n"), "rounded up to a chunk")
	assert.Equal(t, map[string]uint64{gpuA: chunk, gpuB: 0}, grantsInFile(t, a), "host/burst is written before the answer")
	assert.Equal(t, fmt.Sprintf("granted %d\n", chunk), ask(t, a, "grow "+gpuA+" 0\n"), "no need above the grant")
	assert.Equal(t, fmt.Sprintf("refused limit %d\n", chunk), ask(t, a, fmt.Sprintf("grow %s %d\n", gpuA, 8*gib+1)))
	assert.Equal(t, fmt.Sprintf("granted %d\n", 7*gib), ask(t, a, fmt.Sprintf("grow %s %d\n", gpuA, 7*gib)))
	// 4+7 (a) + 5 (b) = 16 GiB: nothing left for b's burst.
	assert.Equal(t, "refused full 0\n", ask(t, b, "grow "+gpuA+" 1\n"))
	assert.Equal(t, "refused never 0\n", ask(t, a, "grow "+gpuB+" 1\n"), "no room above the guarantee on gpuB")
	assert.Equal(t, "refused gpu 0\n", ask(t, b, "grow "+gpuB+" 1\n"), "no share of gpuB")
	assert.Equal(t, "refused gpu 0\n", ask(t, a, "grow MIG-00000000-1111-2222-3333-444444444444 1\n"))

	for _, bad := range []string{
		"", "\n", "grow\n", "grow " + gpuA + " 1", "grow " + gpuA + " 01\n", "grow " + gpuA + " -1\n", "grow " + gpuA + " +1\n",
		"grow " + gpuA + "  1\n", "grow " + gpuA + " 1 \n", "Grow " + gpuA + " 1\n", "grow " + gpuA + " 1\r\n",
		"grow " + gpuA + " 18446744073709551616\n", fmt.Sprintf("grow %s %d\n", gpuA, burstfile.MaxGrantBytes+1),
		"grow gpu-x 1\n", "grow " + gpuA + " 1\n\n", "shrink " + gpuA + " 1\n", "grow " + gpuA + "\x00 1\n",
		strings.Repeat("x", 200), "grow " + gpuA + " " + strings.Repeat("1", 100) + "\n",
	} {
		if bad == "" {
			continue // an empty message cannot be told from a close
		}
		assert.Equal(t, "refused request 0\n", ask(t, a, bad), "%q", bad)
	}
	assert.Equal(t, map[string]uint64{gpuA: 7 * gib, gpuB: 0}, grantsInFile(t, a), "bad requests changed nothing")

	t.Run("reclaiming", func(t *testing.T) {
		c := preparedClaim(t, e.root, uidC, "c", map[string][2]uint64{gpuA: {2 * gib, 2 * gib}})
		d, err := e.book.Admit(burstgrant.Claim{UID: c.UID, Path: c.BurstPath, Shares: map[string]burstgrant.Share{gpuA: {Guarantee: 2 * gib, Limit: 2 * gib}}})
		require.NoError(t, err)
		require.False(t, d.Fits)
		assert.Equal(t, fmt.Sprintf("refused reclaiming %d\n", 7*gib), ask(t, a, fmt.Sprintf("grow %s %d\n", gpuA, 7*gib+1)))
	})

	assert.InDelta(t, 18, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues(burstsock.ReasonRequest)), 0.5)
	assert.InDelta(t, 1, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues(burstsock.ReasonLimit)), 0.5)
	assert.InDelta(t, 1, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues(burstsock.ReasonFull)), 0.5)
	assert.InDelta(t, 1, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues(burstsock.ReasonNever)), 0.5)
	assert.InDelta(t, 2, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues(burstsock.ReasonGPU)), 0.5)
	assert.InDelta(t, 1, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues(burstsock.ReasonReclaiming)), 0.5)
	require.NoError(t, testutil.CollectAndCompare(e.node.metrics, strings.NewReader(`
# HELP vgpu_dra_claim_memory_burst_bytes Memory granted to a claim on a GPU above its guarantee (its burst grant, as in host/burst).
# TYPE vgpu_dra_claim_memory_burst_bytes gauge
vgpu_dra_claim_memory_burst_bytes{claim="a",device_uuid="`+gpuA+`",namespace="ns"} 7.516192768e+09
vgpu_dra_claim_memory_burst_bytes{claim="b",device_uuid="`+gpuA+`",namespace="ns"} 0
`), MetricBurstBytes))
}

func fdCount(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

func TestHostileClients(t *testing.T) {
	e := newEnv(t)
	a := preparedClaim(t, e.root, uidA, "a", map[string][2]uint64{gpuA: {4 * gib, 12 * gib}})
	// Warm up what the runtime starts once (the network poller).
	warm := preparedClaim(t, e.root, uidB, "warm", map[string][2]uint64{gpuB: {gib, 2 * gib}})
	require.NoError(t, e.node.Start(e.ctx, []prepare.PreparedClaim{warm}))
	require.Equal(t, fmt.Sprintf("granted %d\n", chunk), ask(t, warm, "grow "+gpuB+" 1\n"))
	e.node.ReleaseClaim(e.ctx, warm.UID)
	time.Sleep(50 * time.Millisecond)
	goroutines, fds := runtime.NumGoroutine(), fdCount(t)
	require.NoError(t, e.node.EnsureClaim(e.ctx, &a))

	t.Run("a silent client is cut off after the read timeout", func(t *testing.T) {
		conn, err := net.Dial("unixpacket", a.BurstSocketPath)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		start := time.Now()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err = conn.Read(make([]byte, 64))
		require.Error(t, err, "closed without an answer")
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("connections beyond the bound wait until the silent ones are cut off", func(t *testing.T) {
		var held []net.Conn
		for range 2 {
			c, err := net.Dial("unixpacket", a.BurstSocketPath)
			require.NoError(t, err)
			held = append(held, c)
		}
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		time.Sleep(50 * time.Millisecond) // let the server take both
		start := time.Now()
		assert.Equal(t, fmt.Sprintf("granted %d\n", chunk), ask(t, a, "grow "+gpuA+" 1\n"))
		assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "served after a slot freed")
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("many garbage clients", func(t *testing.T) {
		for i := range 50 {
			conn, err := net.Dial("unixpacket", a.BurstSocketPath)
			require.NoError(t, err)
			_, _ = conn.Write([]byte(strings.Repeat("\xff", i*7)))
			_ = conn.Close()
		}
	})

	e.node.ReleaseClaim(e.ctx, a.UID)
	assert.NoFileExists(t, a.BurstSocketPath, "the socket is removed at unprepare")
	assert.Nil(t, e.book.Grants(a.UID))
	// No goroutine of the server is left, nor a descriptor.
	var stacks string
	var nowFD int
	ok := assert.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		stacks, nowFD = string(buf[:runtime.Stack(buf, true)]), fdCount(t)
		return !strings.Contains(stacks, "burstnode.(*server)") && nowFD <= fds
	}, 5*time.Second, 20*time.Millisecond, "no goroutine or descriptor leaks")
	if !ok {
		t.Logf("fds %d (before %d), goroutines before %d\n%s", nowFD, fds, goroutines, stacks)
	}
}

func TestRestartRebuildsGrantsWithoutGrantingTwice(t *testing.T) {
	e := newEnv(t)
	a := preparedClaim(t, e.root, uidA, "a", map[string][2]uint64{gpuA: {4 * gib, 12 * gib}})
	b := preparedClaim(t, e.root, uidB, "b", map[string][2]uint64{gpuA: {4 * gib, 12 * gib}})
	require.NoError(t, e.node.Start(e.ctx, []prepare.PreparedClaim{a, b}))
	require.Equal(t, fmt.Sprintf("granted %d\n", 6*gib), ask(t, a, fmt.Sprintf("grow %s %d\n", gpuA, 6*gib)))
	booked, _ := e.book.Booked(gpuA)
	require.Equal(t, 14*gib, booked)

	// A crash leaves a stale socket file behind.
	e.node.mu.Lock()
	for _, s := range e.node.servers {
		_ = s.ln.Close()
		s.acceptWG.Wait()
	}
	e.node.servers = map[types.UID]*server{}
	e.node.mu.Unlock()
	require.FileExists(t, a.BurstSocketPath)
	e.restart()
	require.NoError(t, e.node.Start(e.ctx, []prepare.PreparedClaim{a, b}))

	assert.Equal(t, map[string]uint64{gpuA: 6 * gib}, e.book.Grants(a.UID), "rebuilt from host/burst")
	booked, _ = e.book.Booked(gpuA)
	assert.Equal(t, 14*gib, booked, "counted once")
	assert.Equal(t, fmt.Sprintf("granted %d\n", 6*gib), ask(t, a, fmt.Sprintf("grow %s %d\n", gpuA, 6*gib)), "the same ask after the restart grants nothing more")
	assert.Equal(t, "refused full 0\n", ask(t, b, fmt.Sprintf("grow %s %d\n", gpuA, 2*gib+1)), "b cannot take what a holds")
	assert.Equal(t, fmt.Sprintf("granted %d\n", 2*gib), ask(t, b, fmt.Sprintf("grow %s %d\n", gpuA, 2*gib)))
}

// Concurrent asks of two claims on one GPU never grant more than fits.
func TestConcurrentAsks(t *testing.T) {
	e := newEnv(t)
	a := preparedClaim(t, e.root, uidA, "a", map[string][2]uint64{gpuA: {4 * gib, 16 * gib}})
	b := preparedClaim(t, e.root, uidB, "b", map[string][2]uint64{gpuA: {4 * gib, 16 * gib}})
	require.NoError(t, e.node.Start(e.ctx, []prepare.PreparedClaim{a, b}))
	var wg sync.WaitGroup
	answers := make(chan string, 64)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := a
			if i%2 == 1 {
				c = b
			}
			conn, err := net.Dial("unixpacket", c.BurstSocketPath)
			if err != nil {
				answers <- "dial: " + err.Error()
				return
			}
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprintf(conn, "grow %s %d\n", gpuA, uint64(i/2+1)*chunk); err != nil {
				answers <- "write: " + err.Error()
				return
			}
			buf := make([]byte, 64)
			n, err := conn.Read(buf)
			if err != nil {
				answers <- "read: " + err.Error()
				return
			}
			answers <- string(buf[:n])
		}()
	}
	wg.Wait()
	close(answers)
	for ans := range answers {
		assert.True(t, strings.HasPrefix(ans, "granted ") || strings.HasPrefix(ans, "refused full "), "%q", ans)
	}
	booked, usable := e.book.Booked(gpuA)
	assert.LessOrEqual(t, booked, usable)
	grants := e.book.Grants(uidA)[gpuA] + e.book.Grants(uidB)[gpuA]
	assert.Equal(t, grantsInFile(t, a)[gpuA]+grantsInFile(t, b)[gpuA], grants, "the files show what the book counts")
	assert.LessOrEqual(t, grants, 8*gib)
}

// A container flooding its socket with asks is refused (rate) past its
// claim's token bucket, without the book being asked, and counted; the
// asks of another claim are answered as before.
func TestAskFloodSlowsOnlyItsClaim(t *testing.T) {
	e := newEnv(t)
	e.node.Close()
	n, err := New(Options{Book: e.book, Reclaimer: e.reclaim, Registry: prometheus.NewRegistry(), Clock: e.clock,
		ReadTimeout: 200 * time.Millisecond, MaxConnections: 2, ProcRoot: e.procRoot,
		AskRate: rate.Every(time.Hour), AskBurst: 10})
	require.NoError(t, err)
	e.node = n
	t.Cleanup(n.Close)
	flooder := preparedClaim(t, e.root, uidA, "flooder", map[string][2]uint64{gpuA: {4 * gib, 8 * gib}})
	other := preparedClaim(t, e.root, uidB, "other", map[string][2]uint64{gpuA: {2 * gib, 6 * gib}})
	require.NoError(t, n.Start(e.ctx, []prepare.PreparedClaim{flooder, other}))

	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				a := ask(t, flooder, "grow "+gpuA+" 1\n")
				mu.Lock()
				answers[strings.Fields(a)[0]+" "+strings.Fields(a)[1]]++
				mu.Unlock()
			}
		})
	}
	var otherAnswers []string
	for i := range 5 {
		otherAnswers = append(otherAnswers, ask(t, other, fmt.Sprintf("grow %s %d\n", gpuA, uint64(i+1)*chunk)))
	}
	wg.Wait()
	for i, a := range otherAnswers {
		assert.Equal(t, fmt.Sprintf("granted %d\n", uint64(i+1)*chunk), a, "the other claim's ask %d", i)
	}
	assert.Equal(t, map[string]int{"granted " + fmt.Sprint(chunk): 10, "refused rate": 190}, answers)
	assert.Equal(t, 190.0, testutil.ToFloat64(n.metrics.refusals.WithLabelValues(burstsock.ReasonRate)))
	assert.Equal(t, map[string]uint64{gpuA: chunk}, e.book.Grants(uidA))
}
