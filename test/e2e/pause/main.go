// Command pause is the pod sandbox process of the e2e cluster: it does
// nothing until it is told to stop. The cluster has no registry, so the
// sandbox image is built locally around this binary.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
