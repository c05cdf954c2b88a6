package monitor

import "os"

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func mkdirAllAndWrite(path string, b []byte) error { return os.WriteFile(path, b, 0o666) }
