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

package flags

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// EnvName returns the environment variable that mirrors flag name under
// prefix: prefix "VGPU_DRA" and flag "state-root" give "VGPU_DRA_STATE_ROOT".
// An empty prefix gives the bare upper-case name ("NODE_NAME").
func EnvName(prefix, name string) string {
	env := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	if prefix == "" {
		return env
	}
	return prefix + "_" + env
}

// Mirror records the environment variable for each flag in fs and appends it
// to the flag's usage text, so --help shows where a value may also come from.
// Flags listed in bare get an unprefixed variable (NODE_NAME, KUBECONFIG),
// matching what Kubernetes manifests conventionally pass down.
func Mirror(fs *pflag.FlagSet, prefix string, bare ...string) {
	unprefixed := make(map[string]bool, len(bare))
	for _, name := range bare {
		unprefixed[name] = true
	}
	fs.VisitAll(func(f *pflag.Flag) {
		p := prefix
		if unprefixed[f.Name] {
			p = ""
		}
		env := EnvName(p, f.Name)
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[envAnnotation] = []string{env}
		f.Usage = fmt.Sprintf("%s [$%s]", f.Usage, env)
	})
}

const envAnnotation = "vgpu-dra/env"

// Apply sets every flag of fs that was not given on the command line from its
// mirrored environment variable, if that is set. An invalid value is an error
// that names both the variable and the flag.
func Apply(fs *pflag.FlagSet) error {
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		names := f.Annotations[envAnnotation]
		if len(names) == 0 {
			return
		}
		value, ok := os.LookupEnv(names[0])
		if !ok {
			return
		}
		if err := fs.Set(f.Name, value); err != nil {
			errs = append(errs, fmt.Sprintf("$%s (flag --%s): %v", names[0], f.Name, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	return nil
}
