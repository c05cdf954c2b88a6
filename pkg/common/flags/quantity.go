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

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// quantityValue adapts resource.Quantity to pflag.Value.
type quantityValue struct{ q *resource.Quantity }

// QuantityVar defines a flag holding a Kubernetes quantity ("256Mi", "1G")
// stored in q; q's value on entry is the default shown in the usage.
func QuantityVar(fs *pflag.FlagSet, q *resource.Quantity, name, usage string) {
	fs.Var(&quantityValue{q}, name, usage)
}

func (v *quantityValue) String() string { return v.q.String() }
func (v *quantityValue) Type() string   { return "quantity" }
func (v *quantityValue) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("quantity %q: %w", s, err)
	}
	*v.q = q
	return nil
}
