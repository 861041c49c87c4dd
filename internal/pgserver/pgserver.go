// Package pgserver runs a private PostgreSQL cluster from the machine's own
// PostgreSQL binaries: initdb into a data directory, a unix socket inside it,
// and a loopback TCP port. The dev stack and the tests use it; production
// connects to an external database instead.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config says where the cluster lives and how it is reached.
type Config struct {
	DataDir string // cluster directory; created by initdb when missing
	Port    int    // loopback TCP port; 0 picks a free one
	BinDir  string // PostgreSQL bin directory; empty finds one on this machine
	Log     string // server log file; empty means DataDir/postgres.log
}

// Server is a running cluster owned by this process.
type Server struct {
	cfg      Config
	password string // the superuser's (PasswordFile)
	cmd      *exec.Cmd
	done     chan struct{} // closed when postgres has exited
	exitErr  error
}

// User is the superuser initdb creates; it connects with its password
// (PasswordFile) only.
const User = "postgres"

// FindBinDir locates the newest PostgreSQL server binaries installed here.
func FindBinDir() (string, error) {
	// initdb on PATH is often a link into the versioned directory that also
	// holds postgres and pg_isready.
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if _, err := os.Stat(filepath.Join(filepath.Dir(real), "pg_isready")); err == nil {
				return filepath.Dir(real), nil
			}
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found; install them (Debian: apt-get install postgresql) or pass a database URL")
	}
	sort.Slice(matches, func(i, j int) bool { return pgVersion(matches[i]) > pgVersion(matches[j]) })
	return filepath.Dir(matches[0]), nil
}

func pgVersion(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Start initialises the cluster if needed and starts it, returning once it
// accepts connections.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("pgserver: DataDir is required")
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dir
	if cfg.BinDir == "" {
		if cfg.BinDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	if cfg.Log == "" {
		cfg.Log = filepath.Join(dir, "postgres.log")
	}
	if cfg.Port == 0 {
		if cfg.Port, err = freePort(); err != nil {
			return nil, err
		}
	} else if err := portFree(cfg.Port); err != nil {
		return nil, err
	}
	if err := makeTraversable(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := initdb(ctx, cfg); err != nil {
		return nil, err
	}
	password, err := ensurePassword(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// A previous run killed hard leaves a pid file behind; postgres itself
	// refuses to start only if that pid is still a postgres, which is right.
	// Its processes may also still hold its shared memory a moment after
	// the kill (each exits once it sees the postmaster gone): postgres
	// refuses to start until they are gone, so that is waited for.
	for deadline := time.Now().Add(lingerWait); ; {
		s := &Server{cfg: cfg, password: password, done: make(chan struct{})}
		logAt := logSize(cfg.Log)
		if err := s.start(); err != nil {
			return nil, err
		}
		err := s.waitReady(ctx)
		if err == nil {
			return s, nil
		}
		_ = s.Stop()
		if !oldServerLingers(cfg.Log, logAt) || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lingerWait bounds the wait for a killed server's processes to let go of
// its shared memory.
const lingerWait = 30 * time.Second

func logSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// oldServerLingers: what postgres logged since offset says a server of
// the data directory killed a moment ago still holds its shared memory.
func oldServerLingers(path string, offset int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, 1<<20))
	return strings.Contains(string(b), "pre-existing shared memory block")
}

func initdb(ctx context.Context, cfg Config) error {
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "PG_VERSION")); err == nil {
		return nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(cfg.BinDir, "initdb"),
		"-D", cfg.DataDir, "-U", User, "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	cmd.SysProcAttr = asPostgres()
	if err := chownForPostgres(cfg.DataDir); err != nil {
		return err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", cfg.DataDir, err, out.String())
	}
	return nil
}

func (s *Server) start() error {
	logf, err := os.OpenFile(s.cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if err := chownForPostgres(s.cfg.Log); err != nil {
		logf.Close()
		return err
	}
	cmd := exec.Command(filepath.Join(s.cfg.BinDir, "postgres"),
		"-D", s.cfg.DataDir,
		"-p", strconv.Itoa(s.cfg.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.cfg.DataDir,
		"-c", "max_connections=300",
		// A dev and test cluster: durability across power loss is not its
		// job, across a crash of PostgreSQL is (synchronous_commit stays
		// on: off lost acknowledged commits to a SIGKILL, and with them
		// what the control plane had acted on).
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	attr := asPostgres()
	attr.Setpgid = true // Ctrl-C in a terminal must reach us, not postgres directly
	// If this process dies without stopping us, postgres does a fast shutdown
	// instead of lingering as an orphan.
	attr.Pdeathsig = syscall.SIGINT
	cmd.SysProcAttr = attr
	// Pdeathsig fires when the creating OS thread exits, so start from a
	// thread that lives as long as the process.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread dies with the process
		started <- cmd.Start()
		s.exitErr = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd = cmd
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited during start (%v); see %s:\n%s", s.exitErr, s.cfg.Log, tail(s.cfg.Log))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := os.Stat(filepath.Join(s.cfg.DataDir, fmt.Sprintf(".s.PGSQL.%d", s.cfg.Port))); err != nil {
			continue
		}
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			if s.acceptsQueries(ctx) {
				return nil
			}
		}
	}
	return fmt.Errorf("postgres did not become ready within 60s; see %s", s.cfg.Log)
}

// acceptsQueries asks pg_isready, which knows the "starting up" state.
func (s *Server) acceptsQueries(ctx context.Context) bool {
	cmd := exec.CommandContext(ctx, filepath.Join(s.cfg.BinDir, "pg_isready"),
		"-h", s.cfg.DataDir, "-p", strconv.Itoa(s.cfg.Port), "-U", User, "-q")
	return cmd.Run() == nil
}

// Addr is the loopback host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cfg.Port)) }

// Port is the TCP port the cluster listens on.
func (s *Server) Port() int { return s.cfg.Port }

// URL is a connection string for database db over loopback, with the
// password.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(User, s.password), Host: s.Addr(), Path: "/" + db}
	q := url.Values{}
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// Stop asks for a fast shutdown and waits for the server to exit. It is
// safe to call more than once.
func (s *Server) Stop() error {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("postgres did not stop within 30s; killed")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("postgres port 127.0.0.1:%d is already in use: %w", port, err)
	}
	return l.Close()
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// Pid is the postmaster's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// EnsureDatabase creates database name if it does not exist yet and
// returns its URL.
func (s *Server) EnsureDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return s.URL(name), nil
}
