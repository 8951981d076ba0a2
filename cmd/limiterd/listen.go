package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
)

// The listening sockets (docs/operations.md, "Restarts nobody notices"):
// limiterd binds server.listen and admin.listen itself, unless the process
// that started it passed them (socket activation: systemd's
// limiterd.socket, or systemd-socket-activate). A passed socket outlives
// the process: while one limiterd drains and the next restores its state,
// connections wait in the kernel's queue instead of being refused
// (decision 196).

// The roles of the passed sockets, as their names say (the socket unit's
// FileDescriptorName=).
const (
	rolePublic = "public"
	roleAdmin  = "admin"
)

// firstPassedFD is the first descriptor a socket-activated process
// receives (SD_LISTEN_FDS_START).
const firstPassedFD = 3

// passedSockets is what the environment says was passed: how many
// descriptors from firstPassedFD on, and the role of each.
type passedSockets struct {
	roles []string // rolePublic or roleAdmin, one per descriptor
}

// readActivation reads the socket-activation variables of env (os.Environ
// style) for the process pid, as sd_listen_fds does: LISTEN_PID must be
// pid (the variables were meant for this process, not a parent's),
// LISTEN_FDS the number of descriptors passed from fd 3 on, and
// LISTEN_FDNAMES, when present, their names separated by ":". Named
// "public" and "admin", each is the listener of that name; otherwise (no
// names, or a socket unit's default name for both) the first is the public
// listener and the second the admin listener. No LISTEN_FDS, or a
// LISTEN_PID of another process, is no socket passed.
func readActivation(env []string, pid int) (passedSockets, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
			vars[k] = v
		}
	}
	if vars["LISTEN_FDS"] == "" {
		return passedSockets{}, nil
	}
	if p, err := strconv.Atoi(vars["LISTEN_PID"]); err != nil || p != pid {
		return passedSockets{}, nil
	}
	n, err := strconv.Atoi(vars["LISTEN_FDS"])
	switch {
	case err != nil || n < 0:
		return passedSockets{}, fmt.Errorf("socket activation: LISTEN_FDS=%q is not a number of sockets", vars["LISTEN_FDS"])
	case n == 0:
		return passedSockets{}, nil
	case n > 2:
		return passedSockets{}, fmt.Errorf("socket activation: %d sockets passed; limiterd takes two, the public listener then the admin listener (named %q and %q)", n, rolePublic, roleAdmin)
	}
	byOrder := []string{rolePublic, roleAdmin}[:n]
	names := strings.Split(vars["LISTEN_FDNAMES"], ":")
	if vars["LISTEN_FDNAMES"] == "" || len(names) != n {
		return passedSockets{roles: byOrder}, nil
	}
	named := 0
	for _, name := range names {
		if name == rolePublic || name == roleAdmin {
			named++
		}
	}
	switch {
	case named == 0:
		return passedSockets{roles: byOrder}, nil
	case named < n || (n == 2 && names[0] == names[1]):
		return passedSockets{}, fmt.Errorf("socket activation: the sockets are named %q; name them %q and %q (FileDescriptorName=), or leave them unnamed: the public listener first", vars["LISTEN_FDNAMES"], rolePublic, roleAdmin)
	}
	return passedSockets{roles: names}, nil
}

// listeners returns the public and the admin listeners: the sockets
// passed to the process for the roles it was given, new ones bound to the
// configured addresses for the others. A passed socket bound elsewhere
// than the configuration says is used, with a warning naming both; the
// log says which were passed.
func listeners(env []string, publicAddr, adminAddr string, log *slog.Logger) (public, admin net.Listener, err error) {
	passed, err := readActivation(env, os.Getpid())
	if err != nil {
		return nil, nil, err
	}
	lns := map[string]net.Listener{}
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for i, role := range passed.roles {
		ln, err := passedListener(firstPassedFD + i)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("socket activation: the %s listener (fd %d): %w", role, firstPassedFD+i, err)
		}
		lns[role] = ln
	}
	if len(lns) > 0 {
		log.Info("listening on the sockets passed by systemd (socket activation)", "listeners", strings.Join(passed.roles, ","))
	}
	for _, r := range []struct{ role, key, addr string }{{rolePublic, "server.listen", publicAddr}, {roleAdmin, "admin.listen", adminAddr}} {
		if ln, ok := lns[r.role]; ok {
			if !sameAddr(ln.Addr(), r.addr) {
				log.Warn("the socket passed to limiterd is not bound where the config says: the socket is used (make the socket unit and the config agree)",
					"listener", r.role, "socket", ln.Addr().String(), r.key, r.addr)
			}
			continue
		}
		ln, err := net.Listen("tcp", r.addr)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", r.key, err)
		}
		lns[r.role] = ln
	}
	return lns[rolePublic], lns[roleAdmin], nil
}

// sameAddr reports whether the socket address a is the configured
// host:port want: the same port (any, for port 0) and the same address
// (any unspecified address for an empty or unspecified host; a name is
// not resolved, and taken as the same).
func sameAddr(a net.Addr, want string) bool {
	ta, ok := a.(*net.TCPAddr)
	host, port, err := net.SplitHostPort(want)
	if !ok || err != nil {
		return true
	}
	if port != "0" && port != strconv.Itoa(ta.Port) {
		return false
	}
	if host == "" {
		return ta.IP.IsUnspecified()
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return true
	}
	if ip.IsUnspecified() {
		return ta.IP.IsUnspecified()
	}
	return ip.Equal(ta.IP)
}

// dashboardURL is the dashboard's address for the start-up log: the admin
// listener's, with an unspecified address (every interface) as this
// machine's loopback, where the operator's browser reaches it through SSH
// (docs/operations.md, "Log in").
func dashboardURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + "/"
	}
	ip := ta.IP
	switch {
	case ip.IsUnspecified() && ip.To4() == nil:
		ip = net.IPv6loopback
	case ip.IsUnspecified():
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port)) + "/"
}
