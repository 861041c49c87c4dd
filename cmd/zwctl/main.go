// Command zwctl is the command-line client of the zonewright API, shaped
// like kubectl: get, describe, apply, delete, wait, rollout, drain, ...
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, errOut: os.Stderr}, os.Getenv)
	stop()
	os.Exit(code)
}
