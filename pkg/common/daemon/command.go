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
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/flags"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/version"
)

// EnvPrefix prefixes the environment variable of every flag (VGPU_DRA_<FLAG>).
const EnvPrefix = "VGPU_DRA"

// Command describes one daemon.
type Command struct {
	// Name is the binary's name; it is also the name of the root logger.
	Name  string
	Short string
	Long  string
	// AddFlags registers the daemon's flags in named sections.
	AddFlags func(*cliflag.NamedFlagSets)
	// UnprefixedEnv lists flags mirrored by a bare environment variable
	// (NODE_NAME, KUBECONFIG) as manifests conventionally pass them.
	UnprefixedEnv []string
	// Validate checks the parsed flags; its error is shown to the user.
	Validate func() error
	// Run runs the daemon until ctx is cancelled.
	Run func(ctx context.Context) error
}

// NewCobra builds the cobra command. On SIGINT or SIGTERM the context given
// to Run is cancelled; a Run that returns context.Canceled has stopped
// cleanly.
func NewCobra(c Command) *cobra.Command {
	logConfig := logsapi.NewLoggingConfiguration()
	cmd := &cobra.Command{
		Use:   c.Name,
		Short: c.Short,
		Long: c.Long + `

Every flag can also be set by the environment variable shown next to it; a
flag given on the command line wins.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.Apply(cmd.Flags()); err != nil {
				return err
			}
			if err := logsapi.ValidateAndApply(logConfig, nil); err != nil {
				return fmt.Errorf("logging configuration: %w", err)
			}
			if err := c.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			logger := klog.Background().WithName(c.Name)
			ctx = klog.NewContext(ctx, logger)
			if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				logger.Error(err, "Stopped")
				return loggedError{err}
			}
			logger.Info("Stopped")
			return nil
		},
	}

	var named cliflag.NamedFlagSets
	c.AddFlags(&named)
	logsapi.AddFlags(logConfig, named.FlagSet("logging"))
	fs := cmd.Flags()
	for _, name := range named.Order {
		fs.AddFlagSet(named.FlagSets[name])
	}
	flags.Mirror(fs, EnvPrefix, c.UnprefixedEnv...)
	cliflag.SetUsageAndHelpFunc(cmd, named, 100)
	return cmd
}

// loggedError marks an error the daemon's logger has reported already.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// Execute runs cmd and exits the process with status 1 if it fails. Errors
// from flags or their validation are printed to stderr; errors of a running
// daemon were logged already.
func Execute(cmd *cobra.Command) {
	err := cmd.Execute()
	if err == nil {
		return
	}
	if !errors.As(err, new(loggedError)) {
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for the flags.\n", cmd.Name(), err, cmd.Name())
	}
	os.Exit(1)
}
