package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one subcommand as `limiterd help` lists it.
type command struct {
	name     string // as typed: "serve", "snapshot export"
	synopsis string // the command line, flags in brackets
	summary  string // one line
}

// commands are the subcommands, in the order help lists them. A command's
// flags are defined where it parses them (flagsAndArgs); `<command> -h`
// prints them from there, and a test keeps each synopsis naming every
// flag the command defines.
var commands = []command{
	{"serve", "limiterd [serve] [-config PATH] [-data-dir DIR]",
		"run the proxy and the admin listener (the default command)"},
	{"check-config", "limiterd check-config [-config PATH] [-data-dir DIR]",
		"validate the configuration and print the effective config (TOML); exit 2 on a bad config"},
	{"backup", "limiterd backup -o FILE [-admin URL] [-token-file FILE] [-config PATH] [-data-dir DIR]",
		"a consistent copy of the database: through the running daemon's GET /api/v1/backup, or of a stopped daemon's file"},
	{"snapshot export", "limiterd snapshot export [-o FILE] [-config PATH] [-data-dir DIR]",
		"the persisted state as JSON (daemon stopped)"},
	{"snapshot import", "limiterd snapshot import FILE [-config PATH] [-data-dir DIR]",
		"replace the persisted state with a JSON export (daemon stopped)"},
	{"import-arweave-config", "limiterd import-arweave-config FILE [-o OUT [-force]] [-merge CONFIG]",
		"an Arweave node's config.json (2.9.6: http_api.limiter.*, local_peers) or JSON/YAML (2.9.7: limiter.*, peers.local) as config.toml, validated; -merge writes its limiter settings into an existing config, keeping the rest; never over a file without -force"},
	{"demo", "limiterd demo [-duration D] [-config PATH] [-data-dir DIR]",
		"run in front of a built-in node with synthetic peers, printing what the limiter does"},
	{"version", "limiterd version | limiterd -version",
		"the version, VCS revision, build time and Go version"},
	{"help", "limiterd help [COMMAND] | limiterd -h | limiterd COMMAND -h",
		"this list, or one command's flags"},
}

// commandNamed returns the command called name.
func commandNamed(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// errHelp is the error flagsAndArgs returns after printing a command's
// help for -h: the command then exits 0.
var errHelp = errors.New("help requested")

// flagExit is a command's exit code after a flag error: 0 after -h, else
// 2 (flag has printed the problem and the usage).
func flagExit(err error) int {
	if errors.Is(err, errHelp) {
		return exitOK
	}
	return exitUsage
}

// helpRequested reports whether args ask for help (-h, -help, --help)
// before any "--".
func helpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// setUsage makes fs print name's synopsis, summary and flags: to w when
// the user asked for help, to stderr after a mistake.
func setUsage(fs *flag.FlagSet, name string) {
	fs.Usage = func() {
		w := fs.Output()
		if c, ok := commandNamed(name); ok {
			fmt.Fprintf(w, "usage: %s\n\n%s.\n", c.synopsis, c.summary)
		} else {
			fmt.Fprintf(w, "usage: limiterd %s [flags]\n", name)
		}
		fmt.Fprintln(w, "\nflags:")
		fs.PrintDefaults()
	}
}

// printHelp writes `limiterd help`: every command with its synopsis.
func printHelp(w io.Writer) {
	fmt.Fprintln(w, "limiterd: a rate-limiting proxy in front of an Arweave node's HTTP API.")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n      %s\n", c.synopsis, c.summary)
	}
	fmt.Fprintln(w, "\n`limiterd COMMAND -h` describes a command's flags. Signals: SIGHUP reloads the")
	fmt.Fprintln(w, "config file, SIGTERM/SIGINT drain and stop. Exit codes: 0 ok, 1 runtime failure,")
	fmt.Fprintln(w, "2 bad config or usage. Documentation: docs/operations.md, docs/api.md.")
}

// help runs `limiterd help [COMMAND]`.
func (m *Main) help(args []string) int {
	if len(args) == 0 {
		printHelp(m.Stdout)
		return exitOK
	}
	name := strings.Join(args, " ")
	if _, ok := commandNamed(name); !ok && name != "snapshot" {
		fmt.Fprintf(m.Stderr, "limiterd help: no command %q\n", name)
		printHelp(m.Stderr)
		return exitUsage
	}
	if name == "version" || name == "help" {
		c, _ := commandNamed(name)
		fmt.Fprintf(m.Stdout, "usage: %s\n\n%s.\n", c.synopsis, c.summary)
		return exitOK
	}
	return m.Run(context.Background(), append(append([]string{}, args...), "-h"))
}

// isTopFlag reports whether arg, first on the command line, is one of the
// flags that stand for a command: -version, -h and their spellings.
func isTopFlag(arg string) bool {
	switch arg {
	case "-version", "--version", "-h", "-help", "--help":
		return true
	}
	return false
}
