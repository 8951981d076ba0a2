package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/persist"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/internal/web"
)

// The bbolt store is the live.Store of the daemon.
var _ live.Store = (*store.DB)(nil)

// The ports the packages declare, and what the daemon plugs into them.
var (
	_ web.SessionStore = (*store.DB)(nil)
	_ web.OffenseStore = (*store.DB)(nil)
	_ web.DataPlane    = (*proxy.Handler)(nil)
	_ persist.Throttle = (*throttle.Throttle)(nil)
	_ live.Switch      = (*throttle.Throttle)(nil)
)

func dbPath(dataDir string) string { return filepath.Join(dataDir, "limiterd.db") }

// openDB opens <data_dir>/limiterd.db; the store's errors name the file
// and say when another process holds it.
func openDB(dataDir string, log *slog.Logger) (*store.DB, error) {
	return store.Open(dbPath(dataDir), store.Options{Timeout: time.Second, Logger: log, CheckThrottle: throttle.CheckSnapshot})
}

// snapshotCmd runs `limiterd snapshot export [-o FILE]` and
// `limiterd snapshot import FILE`.
func (m *Main) snapshotCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		w, code := m.Stderr, exitUsage
		if helpRequested(args) {
			w, code = m.Stdout, exitOK
		}
		for _, name := range []string{"snapshot export", "snapshot import"} {
			c, _ := commandNamed(name)
			fmt.Fprintf(w, "usage: %s\n    %s\n", c.synopsis, c.summary)
		}
		return code
	}
	verb := args[0]
	var out string
	nargs := 0
	if verb == "import" {
		nargs = 1 // FILE, before or after the flags
	}
	src, pos, err := m.flagsAndArgs("snapshot "+verb, args[1:], nargs, func(fs *flag.FlagSet) {
		if verb == "export" {
			fs.StringVar(&out, "o", "", "write to `FILE` instead of standard output")
		}
	})
	var in string
	if len(pos) > 0 {
		in = pos[0]
	}
	if err != nil {
		if code := flagExit(err); code == exitOK {
			return code
		}
		fmt.Fprintln(m.Stderr, "limiterd snapshot:", err)
		return exitUsage
	}
	if verb == "import" && in == "" {
		fmt.Fprintln(m.Stderr, "usage: limiterd snapshot import FILE")
		return exitUsage
	}
	cfg, _, err := config.Load(src)
	if err != nil {
		m.printConfigErrors(err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, nil))
	// Export only reads: a mistyped data dir must not get a new, empty
	// database, nor a backup of an older schema be migrated in place.
	db, err := store.Open(dbPath(cfg.Server.DataDir), store.Options{Timeout: time.Second, Logger: log, ReadOnly: verb == "export", CheckThrottle: throttle.CheckSnapshot})
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd snapshot:", err)
		if errors.Is(err, store.ErrNeedsMigration) {
			fmt.Fprintln(m.Stderr, "limiterd snapshot: export reads only; a limiterd serve (or import) on this data dir upgrades it first")
		}
		return exitRuntime
	}
	defer db.Close()
	if verb == "export" {
		var w io.Writer = m.Stdout
		if out != "" {
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				fmt.Fprintln(m.Stderr, "limiterd snapshot export:", err)
				return exitRuntime
			}
			defer f.Close()
			w = f
		}
		if err := db.Export(ctx, w); err != nil {
			fmt.Fprintln(m.Stderr, "limiterd snapshot export:", err)
			return exitRuntime
		}
		return exitOK
	}
	f, err := os.Open(in)
	if err != nil {
		fmt.Fprintln(m.Stderr, "limiterd snapshot import:", err)
		return exitRuntime
	}
	defer f.Close()
	if err := db.Import(ctx, f); err != nil {
		fmt.Fprintf(m.Stderr, "limiterd snapshot import %s: %v\n", in, err)
		return exitRuntime
	}
	fmt.Fprintf(m.Stderr, "imported %s into %s\n", in, db.Path())
	return exitOK
}
