package redisstore_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a TCP proxy in front of a Redis server that can lose replies: a
// real network fault, not a mock. When armed, it forwards the next request
// holding marker to the server (so Redis executes it), then drops the
// server's reply and cuts both connections: the client sees EOF after its
// command ran, the ambiguous failure on which go-redis retries. A partial
// proxy instead forwards half of the request and cuts: a client dying in
// the middle of a call.
type proxy struct {
	l        net.Listener
	target   string
	marker   []byte
	partial  bool         // cut in the middle of the request instead of after the reply
	armed    atomic.Int64 // replies left to cut
	cuts     atomic.Int64 // replies cut
	accepted atomic.Int64 // client connections
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// newProxy starts a proxy to target, closed in t.Cleanup.
func newProxy(t testing.TB, target, marker string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, marker: []byte(marker), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) Addr() string { return p.l.Addr().String() }

// Arm makes the proxy cut the replies to the next n requests holding the
// marker.
func (p *proxy) Arm(n int64) { p.armed.Store(n) }

// Close stops the proxy and cuts every connection.
func (p *proxy) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		var cut atomic.Bool // the reply now awaited must be dropped
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if bytes.Contains(buf[:n], p.marker) && p.take() {
						if p.partial {
							_, _ = s.Write(buf[:n/2]) // half a command: Redis never runs it
							p.cuts.Add(1)
							break
						}
						cut.Store(true)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = s.Close()
			_ = c.Close()
		}()
		go func() { // server → client
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && cut.Load() {
					p.cuts.Add(1)
					break // drop the reply and cut
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = s.Close()
			_ = c.Close()
		}()
	}
}

// take consumes one armed cut, reporting whether there was one.
func (p *proxy) take() bool {
	for {
		n := p.armed.Load()
		if n <= 0 {
			return false
		}
		if p.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
