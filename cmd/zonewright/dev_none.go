//go:build illumos || nodev

package main

// platformCommands is empty in production builds (illumos, or -tags nodev
// for the container image): they never carry the embedded Temporal server.
func platformCommands() map[string]command { return nil }
