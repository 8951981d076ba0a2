//go:build linux

package proxy

import (
	"sync"
	"syscall"
	"time"
)

// parker holds parked connections in an epoll set of its own (alongside
// the runtime's, which nobody waits on for them meanwhile): one goroutine
// waits on the set, hands a connection whose next request has begun back
// to the server, and closes those idle past idle_timeout. A parked
// connection costs its socket and a map entry. It is safe for concurrent
// use; stop ends its goroutine.
type parker struct {
	h    *Handler
	epfd int
	wake int // an eventfd in the set, to end the wait at stop

	mu     sync.Mutex
	conns  map[int32]*parkedConn // by file descriptor
	gen    int32
	closed bool
	done   chan struct{}
}

type parkedConn struct {
	c        conn
	gen      int32 // tells this parking from an earlier one of the fd
	deadline time.Time
}

// newParker returns a parker and starts its goroutine; nil when the
// system refuses an epoll set (then connections park alone).
func newParker(h *Handler) *parker {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		h.log.Warn("public listener: no epoll set; idle connections keep a goroutine each", "err", err)
		return nil
	}
	wake, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(wake)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(wake), &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(int(wake))
		return nil
	}
	p := &parker{h: h, epfd: epfd, wake: int(wake), conns: map[int32]*parkedConn{}, done: make(chan struct{})}
	go p.run()
	return p
}

// park adds c to the set; false when it cannot (c is then not parked).
func (p *parker) park(c conn, deadline time.Time) bool {
	rc, err := c.TCPConn.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil || fd < 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.gen++
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(fd), Pad: p.gen}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return false
	}
	p.conns[int32(fd)] = &parkedConn{c: c, gen: p.gen, deadline: deadline}
	return true
}

// take removes the connection parked on fd (as gen) from the set; the
// caller owns it then. nil when it is not there (closed meanwhile).
// p.mu must be held.
func (p *parker) take(fd, gen int32) *parkedConn {
	pc := p.conns[fd]
	if pc == nil || pc.gen != gen {
		return nil
	}
	delete(p.conns, fd)
	_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
	return pc
}

func (p *parker) run() {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 256)
	lastSweep := time.Now()
	for {
		n, err := syscall.EpollWait(p.epfd, events, 1000)
		if err != nil && err != syscall.EINTR {
			p.h.log.Error("public listener: the wait for parked connections failed", "err", err)
			return
		}
		var ready []*parkedConn
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == int32(p.wake) {
				continue // stop is under way
			}
			if pc := p.take(ev.Fd, ev.Pad); pc != nil {
				ready = append(ready, pc)
			}
		}
		var expired []*parkedConn
		if now := time.Now(); now.Sub(lastSweep) >= time.Second {
			lastSweep = now
			for fd, pc := range p.conns {
				if now.After(pc.deadline) {
					expired = append(expired, p.take(fd, pc.gen))
				}
			}
		}
		p.mu.Unlock()
		for _, pc := range ready {
			p.h.resume(pc.c)
		}
		for _, pc := range expired {
			pc.c.closeNow()
		}
	}
}

// closeAll closes every parked connection (a drain's start).
func (p *parker) closeAll() {
	p.mu.Lock()
	var all []*parkedConn
	for fd, pc := range p.conns {
		all = append(all, p.take(fd, pc.gen))
	}
	p.mu.Unlock()
	for _, pc := range all {
		pc.c.closeNow()
	}
}

// stop closes every parked connection and ends the goroutine (once).
func (p *parker) stop() {
	p.closeAll()
	p.mu.Lock()
	was := p.closed
	p.closed = true
	p.mu.Unlock()
	if was {
		return
	}
	var one = [8]byte{1}
	_, _ = syscall.Write(p.wake, one[:])
	<-p.done
	syscall.Close(p.epfd)
	syscall.Close(p.wake)
}
