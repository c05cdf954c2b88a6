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

// Package lib_test tests the cluster harness's shell library without a
// cluster: the builds of build.sh run against a stub `go` on PATH that makes
// files where the real one would compile, and fails where told to; the
// version checks of common.sh run against a stub kubectl.
package lib_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stubGo stands in for the go command. Every call is appended to $STUB_CALLS
// as "GOTOOLCHAIN args". A call whose arguments match $STUB_FAIL (an ERE)
// fails; `mod download` of a module@version matching $STUB_MISSING fails as
// the module proxy does for a version it does not have. A downloaded
// module's go directive is $STUB_GO_DIRECTIVE, or $STUB_GO_DIRECTIVE_138 for
// Kubernetes 1.38. `build -o DIR/ PKG...` and `install PKG@V...` make one
// file per package, named as the go command names the binary; with
// STUB_NO_ETCD=1 the build makes no etcd ("server"); a build takes
// $STUB_BUILD_SECONDS.
const stubGo = `#!/usr/bin/env bash
echo "${GOTOOLCHAIN:-unset} $*" >>"$STUB_CALLS"
if [ -n "${STUB_FAIL:-}" ] && [[ "$*" =~ $STUB_FAIL ]]; then
  echo "stub go: $* failed as told" >&2
  exit 3
fi
bin_name() { local p=${1%@*}; [[ ${p##*/} =~ ^v[0-9]+$ ]] && p=${p%/*}; echo "${p##*/}"; }
case "$1 $2" in
  "env GOVERSION") echo go1.26.8 ;;
  "mod download")
    mv=$4
    if [ -n "${STUB_MISSING:-}" ] && [[ "$mv" =~ $STUB_MISSING ]]; then
      echo "go: $mv: reading https://proxy.golang.org/...: 404 Not Found" >&2
      exit 1
    fi
    dir=$STUB_MODS/$mv
    mkdir -p "$dir"
    directive=${STUB_GO_DIRECTIVE:-1.25.0}
    case "$mv" in k8s.io/kubernetes@v1.38.*) directive=${STUB_GO_DIRECTIVE_138:-1.27.0} ;; esac
    printf 'module %s\n\ngo %s\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n' "${mv%@*}" "$directive" >"$dir/go.mod"
    printf '{\n\t"Path": "%s",\n\t"GoMod": "%s",\n\t"Dir": "%s"\n}\n' "${mv%@*}" "$dir/go.mod" "$dir"
    ;;
  "mod tidy") ;;
  build\ *)
    sleep "${STUB_BUILD_SECONDS:-0}"
    out= pkgs=()
    while [ $# -gt 0 ]; do
      case "$1" in
        -o) out=$2; shift 2 ;;
        -tags|-ldflags) shift 2 ;;
        -*|build) shift ;;
        *) pkgs+=("$1"); shift ;;
      esac
    done
    for p in "${pkgs[@]}"; do
      n=$(bin_name "$p")
      [ "$n" = server ] && [ "${STUB_NO_ETCD:-}" = 1 ] && continue
      echo "binary $p" >"$out/$n"
    done
    ;;
  install\ *)
    for p in "$@"; do
      case "$p" in *@*) echo "binary $p" >"$GOBIN/$(bin_name "$p")" ;; esac
    done
    ;;
  *) echo "stub go: unexpected: $*" >&2; exit 2 ;;
esac
`

// harness is one test's cache, run directory and stub go.
type harness struct {
	t     *testing.T
	cache string
	run   string
	stubs string
	calls string
	env   map[string]string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{
		t:     t,
		cache: filepath.Join(dir, "cache"),
		run:   filepath.Join(dir, "run"),
		stubs: filepath.Join(dir, "stubs"),
		calls: filepath.Join(dir, "go-calls"),
		env:   map[string]string{},
	}
	require.NoError(t, os.MkdirAll(h.stubs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.stubs, "go"), []byte(stubGo), 0o755))
	return h
}

// bash runs script after sourcing common.sh and build.sh with errexit on, as
// the harness's scripts do, and returns its combined output and error.
func (h *harness) bash(script string, env ...string) (string, error) {
	h.t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail; source common.sh; source build.sh; "+script)
	cmd.Env = append(os.Environ(),
		"PATH="+h.stubs+":"+os.Getenv("PATH"),
		"E2E_CACHE_DIR="+h.cache,
		"E2E_RUN_DIR="+h.run,
		"E2E_NODES=1",
		"STUB_CALLS="+h.calls,
		"STUB_MODS="+filepath.Join(filepath.Dir(h.calls), "mods"),
		"K8S_VERSION=", "K8S_KUBELET_VERSION=", "E2E_VERSIONS_SAID=", "GOTOOLCHAIN=",
	)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// goCalls returns the stub go's calls since the last goCalls and forgets them.
func (h *harness) goCalls() []string {
	h.t.Helper()
	b, err := os.ReadFile(h.calls)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(h.t, err)
	require.NoError(h.t, os.Remove(h.calls))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// requireNotBuilt fails when the piece's version counts as built or is left
// half-written.
func (h *harness) requireNotBuilt(piece, version string) {
	h.t.Helper()
	dir := filepath.Join(h.cache, piece, version)
	assert.NoDirExists(h.t, dir)
	assert.NoDirExists(h.t, dir+".partial")
}

func (h *harness) requireBuilt(piece, version string, binaries ...string) {
	h.t.Helper()
	dir := filepath.Join(h.cache, piece, version)
	require.FileExists(h.t, filepath.Join(dir, ".built"))
	for _, b := range binaries {
		require.FileExists(h.t, filepath.Join(dir, b))
	}
}

var pieceBinaries = map[string][]string{
	"kubernetes": {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd"},
	"kubelet":    {"kubelet"},
	"containerd": {"containerd", "containerd-shim-runc-v2", "ctr"},
	"helm":       {"helm"},
	"prometheus": {"prometheus"},
}

func TestFailedBuildStampsNothingAndARerunBuilds(t *testing.T) {
	t.Parallel()
	for piece, binaries := range pieceBinaries {
		t.Run(piece, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			out, err := h.bash(`build_piece `+piece+` "the piece" soon; echo "not reached"`, "STUB_FAIL=^(build|install) ")
			require.Error(t, err, out)
			assert.NotContains(t, out, "not reached")
			assert.Regexp(t, `building the piece failed \(exit 3\) at: GOTOOLCHAIN=local go (build|install) .*(kube|containerd|helm|prometheus)`, out,
				"the failed step is named with its arguments")
			assert.Contains(t, out, "failed as told", "the log's end is shown")
			version, err := h.bash(`piece_version ` + piece)
			require.NoError(t, err)
			h.requireNotBuilt(piece, strings.TrimSpace(version))

			out, err = h.bash(`build_piece ` + piece + ` "the piece" soon`)
			require.NoError(t, err, out)
			h.requireBuilt(piece, strings.TrimSpace(version), binaries...)
		})
	}
}

func TestEveryFailingStepFailsTheBuild(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  []string
		step string
	}{
		// The steps after it succeed: a build that went on would look whole.
		"a step before the compile": {env: []string{"STUB_FAIL=^mod tidy"}, step: "at: GOTOOLCHAIN=local go mod tidy (exit 3)"},
		// The compile makes no etcd, so the rename after it fails.
		"a step after the compile": {env: []string{"STUB_NO_ETCD=1"}, step: `mv "$2/server" "$2/etcd" (exit 1)`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			out, err := h.bash(`build_piece kubernetes Kubernetes soon`, append(tc.env, "K8S_VERSION=v1.37.2")...)
			require.Error(t, err, out)
			assert.Contains(t, out, "building Kubernetes failed (exit ")
			assert.Contains(t, out, tc.step)
			h.requireNotBuilt("kubernetes", "v1.37.2")
		})
	}
}

func TestVersionWithoutModuleFailsAndEachVersionHasItsOwnDirectory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	out, err := h.bash(`build_piece kubernetes Kubernetes soon`, "K8S_VERSION=v1.99.0", "STUB_MISSING=@v1\\.99\\.0$")
	require.Error(t, err, out)
	assert.Contains(t, out, "404 Not Found")
	assert.Contains(t, out, "failed (exit 1) at: GOTOOLCHAIN=local go mod download -json k8s.io/kubernetes@v1.99.0")
	h.requireNotBuilt("kubernetes", "v1.99.0")
	h.goCalls()

	for _, v := range []string{"v1.36.3", "v1.37.2"} {
		out, err = h.bash(`build_piece kubernetes Kubernetes soon && build_piece kubelet kubelet soon`, "K8S_VERSION="+v)
		require.NoError(t, err, out)
		h.requireBuilt("kubernetes", v, pieceBinaries["kubernetes"]...)
		h.requireBuilt("kubelet", v, "kubelet")
		apiserver, err := os.ReadFile(filepath.Join(h.cache, "kubernetes", v, "kube-apiserver"))
		require.NoError(t, err)
		assert.Contains(t, string(apiserver), "k8s.io/kubernetes/cmd/kube-apiserver")
		calls := strings.Join(h.goCalls(), "\n")
		assert.Contains(t, calls, "k8s.io/kubernetes@"+v)
		assert.Contains(t, calls, "gitVersion="+v)
	}

	// Back to a version already built: nothing is built, nothing is called.
	out, err = h.bash(`build_piece kubernetes Kubernetes soon && build_piece kubelet kubelet soon && echo "$E2E_K8S_BIN $E2E_KUBELET_BIN"`,
		"K8S_VERSION=v1.36.3")
	require.NoError(t, err, out)
	assert.Empty(t, h.goCalls())
	assert.NotContains(t, out, "building")
	assert.Contains(t, out, filepath.Join(h.cache, "kubernetes", "v1.36.3")+" "+filepath.Join(h.cache, "kubelet", "v1.36.3"))
}

func TestTwoRunsBuildAPieceOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// The first run holds the piece's lock while its build takes 2 s; the
	// second finds the piece built once it gets the lock.
	out, err := h.bash(`build_piece kubelet kubelet soon & sleep 1; build_piece kubelet kubelet soon; wait $!`,
		"K8S_VERSION=v1.37.2", "STUB_BUILD_SECONDS=2")
	require.NoError(t, err, out)
	assert.Contains(t, out, "waiting for another run's build of kubelet")
	assert.Equal(t, 1, strings.Count(out, "built kubelet in"), out)
	builds := 0
	for _, c := range h.goCalls() {
		if strings.HasPrefix(c, "local build ") {
			builds++
		}
	}
	assert.Equal(t, 1, builds)
	h.requireBuilt("kubelet", "v1.37.2", "kubelet")
}

func TestBuildAllStopsAtTheFirstFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	out, err := h.bash(`install_deps() { :; }; build_all; echo "not reached"`,
		"K8S_VERSION=v1.37.2", "STUB_FAIL=^build .*kube-apiserver")
	require.Error(t, err, out)
	assert.NotContains(t, out, "not reached")
	assert.Contains(t, out, "a cluster binary failed to build")
	assert.NoFileExists(t, filepath.Join(h.cache, "pause", "pause"))
	h.requireNotBuilt("kubernetes", "v1.37.2")
}

func TestGoToolchainOnlyForTheBuildsThatNeedIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	out, err := h.bash(`build_piece kubernetes Kubernetes soon && build_piece kubelet kubelet soon && build_piece containerd containerd soon`,
		"K8S_VERSION=v1.38.0-beta.0")
	require.NoError(t, err, out)
	assert.Contains(t, out, "building k8s.io/kubernetes@v1.38.0-beta.0 with go1.27.3: it needs go 1.27.0, this machine has go1.26.8")
	h.requireBuilt("kubernetes", "v1.38.0-beta.0", pieceBinaries["kubernetes"]...)
	h.requireBuilt("kubelet", "v1.37.2", "kubelet")
	var newGo, localGo []string
	for _, c := range h.goCalls() {
		toolchain, args, _ := strings.Cut(c, " ")
		switch toolchain {
		case "go1.27.3":
			newGo = append(newGo, args)
		case "local":
			localGo = append(localGo, args)
		default:
			t.Errorf("go called with GOTOOLCHAIN=%s: %s", toolchain, args)
		}
	}
	require.Len(t, newGo, 2, "the 1.38 module's tidy and build, nothing else: %v", newGo)
	assert.True(t, strings.HasPrefix(newGo[0], "mod tidy"), newGo[0])
	assert.True(t, strings.HasPrefix(newGo[1], "build "), newGo[1])
	assert.Contains(t, newGo[1], "gitVersion=v1.38.0-beta.0")
	for _, c := range localGo {
		assert.NotContains(t, c, "gitVersion=v1.38", "a 1.38 build step ran on the machine's Go")
	}
	assert.Contains(t, strings.Join(localGo, "\n"), "gitVersion=v1.37.2", "the 1.37 kubelet builds with the machine's Go")
	assert.Contains(t, strings.Join(localGo, "\n"), "install ", "containerd builds with the machine's Go")

	// A module newer than the approved toolchain is refused, naming both.
	out, err = h.bash(`build_piece kubernetes Kubernetes soon`, "K8S_VERSION=v1.38.1", "STUB_GO_DIRECTIVE_138=1.28.0")
	require.Error(t, err, out)
	assert.Contains(t, out, "k8s.io/kubernetes@v1.38.1 needs go 1.28.0, newer than E2E_GO_TOOLCHAIN=go1.27.3")
	h.requireNotBuilt("kubernetes", "v1.38.1")
}

func TestKubeletVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		env      []string
		kubelet  string
		wantNote bool
	}{
		{env: []string{"K8S_VERSION=v1.36.3"}, kubelet: "v1.36.3"},
		{env: nil, kubelet: "v1.37.2"},
		{env: []string{"K8S_VERSION=v1.38.0-beta.0"}, kubelet: "v1.37.2", wantNote: true},
		{env: []string{"K8S_VERSION=v1.38.0-beta.0", "K8S_KUBELET_VERSION=v1.38.0-beta.0"}, kubelet: "v1.38.0-beta.0"},
	} {
		out, err := h.bash(`say_versions; say_versions; echo "kubelet=$K8S_KUBELET_VERSION bin=$E2E_KUBELET_BIN"`, tc.env...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "kubelet="+tc.kubelet+" bin="+filepath.Join(h.cache, "kubelet", tc.kubelet), tc.env)
		assert.Equal(t, 1, strings.Count(out, "(kubelet "+tc.kubelet+"), containerd"), "one versions line: %s", out)
		if tc.wantNote {
			assert.Equal(t, 1, strings.Count(out, "sigs.k8s.io/iptables-wrappers"), out)
		} else {
			assert.NotContains(t, out, "iptables-wrappers")
		}
	}
}

// stubKubectl answers the two questions cluster_versions asks.
const stubKubectl = `#!/usr/bin/env bash
case "$*" in
  *"get --raw /version"*) printf '{\n  "major": "1",\n  "gitVersion": "%s",\n  "goVersion": "go1.26.8"\n}\n' "$STUB_SERVER" ;;
  *"get node "*) printf '%s' "$STUB_KUBELET" ;;
  *) exit 2 ;;
esac
`

func TestClusterVersions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, v := range []string{"v1.37.2", "v1.38.0-beta.0"} {
		dir := filepath.Join(h.cache, "kubernetes", v)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl"), []byte(stubKubectl), 0o755))
	}
	out, err := h.bash(`cluster_versions`, "K8S_VERSION=v1.37.2", "STUB_SERVER=v1.37.2", "STUB_KUBELET=v1.37.2")
	require.NoError(t, err, out)
	assert.Contains(t, out, "the API server reports v1.37.2; the kubelets of")

	out, err = h.bash(`cluster_versions`, "K8S_VERSION=v1.38.0-beta.0", "STUB_SERVER=v1.38.0-beta.0", "STUB_KUBELET=v1.37.2")
	require.NoError(t, err, out)

	out, err = h.bash(`cluster_versions`, "K8S_VERSION=v1.38.0-beta.0", "STUB_SERVER=v1.35.4", "STUB_KUBELET=v1.35.4")
	require.Error(t, err, out)
	assert.Contains(t, out, "the API server reports v1.35.4, but K8S_VERSION is v1.38.0-beta.0")
	assert.Contains(t, out, "kubelet reports v1.35.4, but K8S_KUBELET_VERSION is v1.37.2")
}
