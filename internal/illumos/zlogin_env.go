package illumos

import (
	"bytes"
	"strconv"
	"strings"
)

// EnvSession is an exec session whose command runs with an environment
// of the caller's: a container's, which may hold secrets. zlogin resets
// the environment (spec §6.2) and its argv is readable by every user of
// the global zone, so the values travel on the session's stdin: Cmd runs
// a short shell preamble in the zone that reads Block (one NAME=VALUE
// assignment a line, values quoted for the shell, an empty line last),
// exports each variable and then executes the command. Nothing secret is
// in Cmd.
type EnvSession struct {
	Cmd Cmd
	// Block is what the caller writes to the session's stdin first.
	Block []byte
	// Ready, on a terminal, is the line the preamble prints once it has
	// turned the zone's terminal's echo and line editing off: Block must
	// not be written before (the terminal would echo it and mangle long
	// lines), and the line itself is not the command's output.
	Ready string
}

// envReady is the line an EnvSession's preamble prints on a terminal.
const envReady = "zonewright-env-ready"

// EnvSessionCmd is SessionCmd for a command that runs with env, as the
// zone's user z.User: with tty, zlogin -i;
// never -n, since the environment comes on stdin (a caller without stdin
// closes it after Block).
func (z InZone) EnvSessionCmd(argv []string, tty bool, env []EnvVar) (EnvSession, error) {
	const op = "zlogin"
	if z.Here {
		return EnvSession{}, invalidf(op, z.Zone, "an exec session needs a zone")
	}
	for _, e := range env {
		if !validEnvName(e.Name) {
			return EnvSession{}, invalidf(op, z.Zone, "invalid environment variable name %q", e.Name)
		}
		if strings.IndexByte(e.Value, 0) >= 0 {
			return EnvSession{}, invalidf(op, z.Zone, "the value of %s contains a NUL byte", e.Name)
		}
	}
	c, err := z.cmd(op, argv, nil)
	if err != nil {
		return EnvSession{}, err
	}
	// The preamble's own variables must not take the name of one of the
	// container's, which they would then unset.
	suffix := ""
	for i := 0; ; i++ {
		if !hasEnv(env, "_zwl"+suffix) && !hasEnv(env, "_zwn"+suffix) && !hasEnv(env, "_zws"+suffix) {
			break
		}
		suffix = strconv.Itoa(i)
	}
	line, nl, saved := "_zwl"+suffix, "_zwn"+suffix, "_zws"+suffix
	var pre strings.Builder
	// A newline in a value travels as "$nl" outside its quotes: a line
	// is one variable.
	pre.WriteString(nl + "='\n'; ")
	if tty {
		pre.WriteString(saved + "=$(stty -g); stty raw -echo; echo " + envReady + "; ")
	}
	pre.WriteString("while IFS= read -r " + line + " && [ -n \"$" + line + "\" ]; do eval \"export $" + line + "\"; done; ")
	if tty {
		pre.WriteString("stty \"$" + saved + "\"; unset " + saved + "; ")
	}
	pre.WriteString("unset " + line + " " + nl + "; exec")
	// zlogin joins its words with spaces for the zone's shell: the
	// preamble is shell text, the command's words stay quoted.
	// The zone's name follows zlogin's options (-l USER, if any).
	zoneAt := len(c.Args) - len(argv) - 1
	args := append(append([]string{}, c.Args[:zoneAt+1]...), pre.String())
	args = append(args, c.Args[zoneAt+1:]...)
	if tty {
		args = append([]string{"-i"}, args...)
	}
	c.Args = args

	var b bytes.Buffer
	for _, e := range env {
		b.WriteString(e.Name)
		b.WriteByte('=')
		b.WriteString(strings.ReplaceAll(ShellQuote(e.Value), "\n", `'"$`+nl+`"'`))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	s := EnvSession{Cmd: c, Block: b.Bytes()}
	if tty {
		s.Ready = envReady
	}
	return s, nil
}

func hasEnv(env []EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// validLoginName is a user zlogin -l and method_credential take: a login
// name or a uid, never an option.
func validLoginName(s string) bool {
	if s == "" || len(s) > 32 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
