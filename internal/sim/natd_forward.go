package sim

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// natd's data path: listeners on the rules' addresses, the choice of a
// target, sessions, and the TCP and UDP forwarding itself.

// soReusePort is Linux's SO_REUSEPORT, which package syscall lacks (the
// simulator runs on Linux only).
const soReusePort = 0xf

func reusePortConfig() net.ListenConfig {
	return net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

func (l *natListener) listen() error {
	lc := reusePortConfig()
	addr := netip.AddrPortFrom(l.key.addr, uint16(l.key.port)).String()
	if l.key.proto == "tcp" {
		ln, err := lc.Listen(context.Background(), "tcp4", addr)
		if err != nil {
			return err
		}
		l.tcp = ln
		return nil
	}
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return err
	}
	l.udp = pc.(*net.UDPConn)
	return nil
}

func (l *natListener) close() {
	if l.tcp != nil {
		l.tcp.Close()
	}
	if l.udp != nil {
		l.mu.Lock()
		l.chain = nil
		idle := len(l.flows) == 0
		l.mu.Unlock()
		// A UDP socket also carries its flows' replies: it closes when
		// the last flow ends (sessions outlive rules).
		if idle {
			l.udp.Close()
		}
	}
}

// pick chooses the target of a new session from client (spec §10.3).
func (l *natListener) pick(client netip.Addr) (*natRoute, netip.Addr, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.chain) == 0 {
		return nil, netip.Addr{}, false
	}
	r := l.chain[0]
	if t, ok := r.affinity[client]; ok {
		return r, t, true
	}
	target := r.targets[r.next%len(r.targets)]
	r.next++
	if r.affinity != nil {
		r.affinity[client] = target
	}
	if r.roundRobin && len(l.chain) > 1 {
		l.chain = append(l.chain[1:], r)
	}
	return r, target, true
}

// openSession records a new session in the table and counts the hit.
func (d *natd) openSession(k natKey, r *natRoute, target netip.Addr, client netip.AddrPort) int {
	id := 0
	err := d.h.updateNAT("global", func(t *NATTable) bool {
		for _, e := range t.Rules {
			if e.ID == r.rule {
				e.Hits++
			}
		}
		t.NextID++
		id = t.NextID
		t.Added++
		t.Sessions = append(t.Sessions, &NATSession{
			ID: id, Rule: r.rule, Type: "RDR", Proto: k.proto,
			In: target.String(), InPort: r.port, Out: k.addr.String(), OutPort: k.port,
			Remote: client.Addr().Unmap().String(), RemotePort: int(client.Port()), Owner: d.pid,
		})
		return true
	})
	if err != nil {
		d.log.Print(err)
	}
	return id
}

// closeSession drops an ended session (gone already if -F flushed it).
func (d *natd) closeSession(id int) {
	err := d.h.updateNAT("global", func(t *NATTable) bool {
		for i, s := range t.Sessions {
			if s.ID == id {
				t.Sessions = append(t.Sessions[:i], t.Sessions[i+1:]...)
				t.Expired++
				t.reap()
				return true
			}
		}
		return false
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Print(err)
	}
}

func (d *natd) track(c *natConn, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.conns[c] = true
	} else {
		delete(d.conns, c)
	}
}

// cutAll ends every forwarded connection and flow.
func (d *natd) cutAll() {
	d.mu.Lock()
	conns := d.conns
	d.conns = map[*natConn]bool{}
	d.mu.Unlock()
	for c := range conns {
		c.close()
	}
}

// reset closes a TCP connection with an RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (d *natd) serveTCP(l *natListener) {
	for {
		c, err := l.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go d.forwardTCP(l, c)
	}
}

func (d *natd) forwardTCP(l *natListener, c net.Conn) {
	client, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	r, target, ok := l.pick(client.Addr().Unmap())
	if !ok {
		reset(c)
		return
	}
	b, err := net.DialTimeout("tcp4", netip.AddrPortFrom(target, uint16(r.port)).String(), natdDialTimeout)
	if err != nil {
		// A refusing backend: the client gets an RST at once.
		reset(c)
		return
	}
	id := d.openSession(l.key, r, target, client)
	var once sync.Once
	nc := &natConn{session: id}
	nc.close = func() { once.Do(func() { reset(c); reset(b) }) }
	d.track(nc, true)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
	c.Close()
	b.Close()
	d.track(nc, false)
	d.closeSession(id)
}

// natFlow is one UDP client's session.
type natFlow struct {
	conn    *net.UDPConn // connected to the backend
	last    time.Time
	mu      sync.Mutex
	session int
}

func (d *natd) serveUDP(l *natListener) {
	buf := make([]byte, 65536)
	for {
		n, from, err := l.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		key := from.String()
		l.mu.Lock()
		f := l.flows[key]
		l.mu.Unlock()
		if f == nil {
			if f = d.newFlow(l, from); f == nil {
				continue
			}
		}
		f.mu.Lock()
		f.last = time.Now()
		f.mu.Unlock()
		f.conn.Write(buf[:n])
	}
}

func (d *natd) newFlow(l *natListener, from netip.AddrPort) *natFlow {
	r, target, ok := l.pick(from.Addr().Unmap())
	if !ok {
		return nil
	}
	bc, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(target, uint16(r.port))))
	if err != nil {
		return nil
	}
	f := &natFlow{conn: bc, last: time.Now()}
	f.session = d.openSession(l.key, r, target, from)
	key := from.String()
	l.mu.Lock()
	l.flows[key] = f
	l.mu.Unlock()
	var once sync.Once
	nc := &natConn{session: f.session}
	nc.close = func() { once.Do(func() { bc.Close() }) }
	d.track(nc, true)
	go func() {
		buf := make([]byte, 65536)
		for {
			bc.SetReadDeadline(time.Now().Add(natdUDPIdle))
			n, err := bc.Read(buf)
			if err != nil {
				var ne net.Error
				f.mu.Lock()
				idle := time.Since(f.last) >= natdUDPIdle
				f.mu.Unlock()
				if errors.As(err, &ne) && ne.Timeout() && !idle {
					continue
				}
				break // idle, refused (ICMP), or cut by -F
			}
			l.udp.WriteToUDPAddrPort(buf[:n], from)
		}
		nc.close()
		d.track(nc, false)
		l.mu.Lock()
		delete(l.flows, key)
		last := len(l.flows) == 0 && l.chain == nil
		l.mu.Unlock()
		if last {
			l.udp.Close()
		}
		d.closeSession(f.session)
	}()
	return f
}
