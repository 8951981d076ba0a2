package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
)

// notifier tells systemd how the daemon is doing, by the sd_notify
// protocol (no libsystemd): each message is one datagram of "KEY=VALUE"
// lines sent to the unix socket NOTIFY_SOCKET names (a path, or
// "@name" in the abstract namespace). Without NOTIFY_SOCKET it does
// nothing. A NOTIFY_SOCKET that is not a socket, or a send that fails, is
// logged — once — and the daemon goes on: systemd then times the start
// out, which the log explains. It is safe for concurrent use.
type notifier struct {
	addr *net.UnixAddr // nil: not under systemd, or not usable
	log  *slog.Logger

	mu     sync.Mutex
	failed bool // a failure was logged
}

// newNotifier reads NOTIFY_SOCKET from env (os.Environ style).
func newNotifier(env []string, log *slog.Logger) *notifier {
	n := &notifier{log: log}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NOTIFY_SOCKET="); ok {
			path = v
		}
	}
	if path == "" {
		return n
	}
	if path[0] != '@' {
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			log.Warn("NOTIFY_SOCKET cannot be used: systemd will not hear that limiterd is ready", "notify_socket", path, "err", err)
			return n
		case fi.Mode()&os.ModeSocket == 0:
			log.Warn("NOTIFY_SOCKET is not a socket: systemd will not hear that limiterd is ready", "notify_socket", path, "mode", fi.Mode().String())
			return n
		}
	}
	// Go maps a leading "@" to the abstract namespace.
	n.addr = &net.UnixAddr{Name: path, Net: "unixgram"}
	return n
}

// enabled reports whether messages are sent.
func (n *notifier) enabled() bool { return n != nil && n.addr != nil }

// send sends one message, such as "READY=1\nSTATUS=serving". It dials
// for every message, as sd_notify does, so that a systemd re-executed
// since start is still reached.
func (n *notifier) send(state string) {
	if !n.enabled() {
		return
	}
	err := n.write(state)
	if err == nil {
		return
	}
	n.mu.Lock()
	first := !n.failed
	n.failed = true
	n.mu.Unlock()
	if first {
		n.log.Warn("sd_notify failed: systemd may not hear of limiterd's state (later failures are not logged)", "notify_socket", n.addr.Name, "state", strings.ReplaceAll(state, "\n", " "), "err", err)
	}
}

func (n *notifier) write(state string) error {
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// ready says the daemon serves: the database open, the state restored,
// both listeners accepting.
func (n *notifier) ready(status string) {
	n.send("READY=1\nSTATUS=" + status)
}

// reloading says a reload begins: RELOADING=1 with the monotonic clock
// (systemd 253+ needs MONOTONIC_USEC to match a reload to its request;
// older ones ignore it). ready ends it.
func (n *notifier) reloading() {
	msg := "RELOADING=1\nSTATUS=reloading the configuration"
	if us, ok := monotonicUsec(); ok {
		msg += fmt.Sprintf("\nMONOTONIC_USEC=%d", us)
	}
	n.send(msg)
}

// stopping says the drain begins.
func (n *notifier) stopping() {
	n.send("STOPPING=1\nSTATUS=draining in-flight requests")
}
