// Package illumos is zonewright's only way to change an illumos host: typed
// wrappers around zonecfg, zoneadm, zlogin, dladm, zfs, zpool, ipadm, route,
// ipnat, the SMF commands and the host-facts commands.
//
// Every operation builds an argv (never a shell string), runs it through an
// Executor with a deadline, parses the command's parsable output with a pure
// function, and returns an *Error whose Kind says what a caller can do about
// a failure: succeed idempotently (ErrNotFound on delete, ErrAlreadyExists on
// create), retry (ErrTransient, ErrBusy), wait for another state
// (ErrWrongState), or give up (ErrInvalid). Requests that the commands would
// refuse (bad names, values that cannot be quoted) fail as ErrInvalid before
// anything runs.
//
// Layout: one file per command, the command's absolute path a constant at the
// top of it; parsers and renderers are separate pure functions (Parse*,
// Render*) tested on their own; names.go derives zone, link and dataset names
// that are valid on illumos; classify.go maps exit statuses and messages to
// kinds; exec.go is the Runner. Host bundles the per-command types over one
// Executor.
//
// Commands run inside a zone (ipadm, route, svcadm, svccfg, svcs and
// arbitrary probes) go through zlogin, which joins its arguments with spaces
// and lets the zone's shell parse them again: every word is therefore
// shell-quoted (see ShellQuote).
//
// Deadlines: every command runs in a process group of its own. At the
// deadline the group gets SIGINT (which zlogin forwards to the command in the
// zone, out of reach of any signal to the group) and, Runner.WaitDelay later,
// SIGKILL.
package illumos
