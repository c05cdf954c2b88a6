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

package prepare

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const lockFileName = "checkpoint.lock"

// stateLock serialises work on one state root across plugin instances: a
// rolling update runs the old and the new plugin side by side, and the new
// one's recovery must not run while the old one is half-way through a
// prepare. It is an flock on StateRoot/checkpoint.lock, held per call.
type stateLock struct {
	file *os.File
}

func openStateLock(path string) (*stateLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, checkpointFileMode)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	return &stateLock{file: f}, nil
}

func (l *stateLock) lock() error {
	for {
		err := unix.Flock(int(l.file.Fd()), unix.LOCK_EX)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("lock %s: %w", l.file.Name(), err)
		}
		return nil
	}
}

func (l *stateLock) unlock() {
	// Closing the process releases the lock too, so an error here cannot
	// leave it held beyond the process.
	_ = unix.Flock(int(l.file.Fd()), unix.LOCK_UN)
}

// begin serialises a call with the manager's other calls and with other
// instances, and reloads the checkpoint, which another instance may have
// changed since this one last looked. end must be called when done.
func (m *Manager) begin() (end func(), err error) {
	m.mu.Lock()
	if err := m.stateLock.lock(); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	end = func() {
		m.stateLock.unlock()
		m.mu.Unlock()
	}
	cp, err := loadCheckpoint(m.layout.checkpointPath())
	if err != nil {
		end()
		return nil, err
	}
	m.cp = cp
	return end, nil
}
