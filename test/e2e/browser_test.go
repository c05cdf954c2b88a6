//go:build e2e

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

package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// browser is headless Chromium driven through the DevTools protocol over
// its pipe (--remote-debugging-pipe: JSON messages ended by NUL on file
// descriptors 3 and 4), so the specs need no WebSocket client.
type browser struct {
	cmd     *exec.Cmd
	toCh    io.WriteCloser
	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	session string
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// chromiumPath is Debian's chromium (apt-get install chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium is needed for the browser specs: apt-get install chromium")
	return ""
}

// startBrowser starts headless Chromium with one page of the given size
// and stops it when the test ends.
func startBrowser(t *testing.T, ctx context.Context, width, height int) *browser {
	t.Helper()
	// Chromium reads commands from fd 3 and writes answers to fd 4.
	cmdR, cmdW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, chromiumPath(t), "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe",
		"--user-data-dir="+t.TempDir(), fmt.Sprintf("--window-size=%d,%d", width, height), "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start(), "start chromium")
	_ = cmdR.Close()
	_ = outW.Close()
	b := &browser{cmd: cmd, toCh: cmdW, waiting: map[int]chan cdpReply{}}
	go b.read(outR)
	t.Cleanup(func() {
		_ = b.toCh.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var target struct {
		TargetID string `json:"targetId"`
	}
	require.NoError(t, b.call(ctx, false, "Target.createTarget", map[string]any{"url": "about:blank"}, &target))
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	require.NoError(t, b.call(ctx, false, "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached))
	b.session = attached.SessionID
	require.NoError(t, b.call(ctx, true, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil))
	return b
}

// read dispatches Chromium's answers to their calls; events are dropped.
func (b *browser) read(r io.Reader) {
	in := bufio.NewReader(r)
	for {
		msg, err := in.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var reply struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &reply) != nil || reply.ID == 0 {
			continue
		}
		b.mu.Lock()
		ch := b.waiting[reply.ID]
		delete(b.waiting, reply.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- reply.cdpReply
		}
	}
}

// call sends one DevTools command, to the page's session when onPage, and
// decodes its result into out (when not nil).
func (b *browser) call(ctx context.Context, onPage bool, method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	msg := map[string]any{"id": id, "method": method, "params": params}
	if onPage {
		msg["sessionId"] = b.session
	}
	data, err := json.Marshal(msg)
	if err == nil {
		_, err = b.toCh.Write(append(data, 0))
	}
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	case reply, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: chromium closed its pipe", method)
		}
		if reply.Error != nil {
			return fmt.Errorf("%s: %s", method, reply.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(reply.Result, out)
		}
		return nil
	}
}

// navigate loads url in the page.
func (b *browser) navigate(ctx context.Context, url string) error {
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, true, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, nav.ErrorText)
	}
	// Page.navigate answers once the navigation commits, while the page
	// may still be parsing: a query then sees half a document.
	for {
		var state string
		if err := b.eval(ctx, "document.readyState", &state); err != nil {
			return err
		}
		if state == "complete" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("navigate to %s: the page did not finish loading: %w", url, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// eval evaluates a JavaScript expression in the page into out.
func (b *browser) eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, true, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res); err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return errors.New("evaluate " + expr + ": " + res.ExceptionDetails.Text)
	}
	if len(res.Result.Value) == 0 {
		return fmt.Errorf("evaluate %s: no value", expr)
	}
	return json.Unmarshal(res.Result.Value, out)
}

// screenshot writes the whole page as PNG.
func (b *browser) screenshot(ctx context.Context, path string) error {
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, true, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}
