// Command mockserver runs a mockcluster in a process of its own, so that a
// benchmark measures only its client's CPU time: the harness (benchcmp) must
// never host the server it measures against.
//
//	mockserver [-nodes 3]
//
// It prints one line on stdout, the connection string with the bucket
// ("couchbase://127.0.0.1:p1,.../default"), then serves until SIGINT or
// SIGTERM, or until its standard input reaches end of file when -stdin is
// set. The user is mockcluster.DefaultUser / DefaultPassword.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvwire/kvwire/mockcluster"
)

func main() {
	nodes := flag.Int("nodes", mockcluster.DefaultNodes, "number of nodes")
	stdin := flag.Bool("stdin", false, "also stop when standard input reaches end of file")
	flag.Parse()
	if *nodes < 1 || *nodes > 64 {
		fmt.Fprintf(os.Stderr, "mockserver: -nodes %d: want 1 to 64\n", *nodes)
		os.Exit(2)
	}
	mc, err := mockcluster.New(mockcluster.Options{Nodes: *nodes})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mockserver: %v\n", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "%s/%s\n", mc.ConnString(), mockcluster.DefaultBucket)
	if err := w.Flush(); err != nil {
		mc.Close()
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	eof := make(chan struct{})
	if *stdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
	}
	select {
	case <-stop:
	case <-eof:
	}
	mc.Close()
}
