package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT and SIGTERM cancel the context: serve and bench stop cleanly
	// (and bench prints its summary); an operation in flight ends as
	// interrupted. bench lets its operations in flight finish, which
	// against a server that does not answer takes until their timeout: a
	// second signal ends kvcli at once.
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "kvcli: interrupted again: exiting without waiting for the operations in flight (a write among them may have been applied)")
		os.Exit(exitInterrupted)
	}()
	code := run(ctx, os.Args[1:], &env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	})
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}
