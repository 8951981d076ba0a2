package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/web/api"
)

// backupCmd runs `limiterd backup -o FILE [-admin URL] [-token-file FILE]`:
// a consistent copy of the database, through the running daemon's GET
// /api/v1/backup, or straight from the file of a stopped one. The copy
// goes to FILE.tmp, is checked (it must open as a limiterd database of
// this schema), then renamed to FILE: FILE is a whole, valid backup or
// is not touched.
func (m *Main) backupCmd(ctx context.Context, args []string) int {
	var out, admin, tokenFile string
	src, err := m.commonFlags("backup", args, func(fs *flag.FlagSet) {
		fs.StringVar(&out, "o", "", "write the copy to `FILE` (required; replaced atomically)")
		fs.StringVar(&admin, "admin", "", "the running daemon's admin `URL`, such as http://127.0.0.1:1986 (default: ask the daemon at admin.listen when it holds the database, else copy the file)")
		fs.StringVar(&tokenFile, "token-file", "", "a `FILE` holding an admin-scope token (default: the daemon's admin token as the config says: admin.token, admin.token_file or <data_dir>/admin.token)")
	})
	if err != nil {
		return flagExit(err)
	}
	if out == "" {
		fmt.Fprintln(m.Stderr, "limiterd backup: -o FILE is required")
		return exitUsage
	}
	cfg, _, err := config.Load(src)
	if err != nil {
		m.printConfigErrors(err)
		return exitUsage
	}
	tmp := out + ".tmp"
	defer os.Remove(tmp) // gone once renamed; a failed copy's leftovers
	via := ""
	if admin == "" {
		// A stopped daemon's file can be copied directly; a running one
		// holds its lock and is asked instead.
		db, err := store.Open(dbPath(cfg.Server.DataDir), store.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
		switch {
		case err == nil:
			err = writeBackup(tmp, func(w io.Writer) (int64, error) {
				return db.Backup(ctx, func(int64) (io.Writer, error) { return w, nil })
			})
			db.Close()
			if err != nil {
				fmt.Fprintln(m.Stderr, "limiterd backup:", err)
				return exitRuntime
			}
			via = "the file " + db.Path() + " (no daemon holds it)"
		case errors.Is(err, store.ErrLocked):
			admin = adminURL(cfg.Admin.Listen)
		default:
			fmt.Fprintln(m.Stderr, "limiterd backup:", err)
			return exitRuntime
		}
	}
	if via == "" {
		token, from, err := readTokenFlag(tokenFile, cfg)
		if err != nil {
			fmt.Fprintln(m.Stderr, "limiterd backup:", err)
			return exitRuntime
		}
		if err := writeBackup(tmp, func(w io.Writer) (int64, error) { return fetchBackup(ctx, admin, token, from, w) }); err != nil {
			fmt.Fprintln(m.Stderr, "limiterd backup:", err)
			return exitRuntime
		}
		via = strings.TrimSuffix(admin, "/") + "/api/v1/backup"
	}
	// The copy must be a database this limiterd opens as it is.
	db, err := store.Open(tmp, store.Options{ReadOnly: true})
	if err != nil {
		fmt.Fprintf(m.Stderr, "limiterd backup: the copy is not usable: %v\n", err)
		return exitRuntime
	}
	size := db.Size()
	db.Close()
	if err := os.Rename(tmp, out); err != nil {
		fmt.Fprintln(m.Stderr, "limiterd backup:", err)
		return exitRuntime
	}
	syncDir(filepath.Dir(out))
	fmt.Fprintf(m.Stderr, "limiterd backup: %s: %d bytes, from %s\n", out, size, via)
	return exitOK
}

// writeBackup creates path (mode 0600), has fill write the copy, and syncs
// it.
func writeBackup(path string, fill func(io.Writer) (int64, error)) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := fill(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// fetchBackup streams GET <admin>/api/v1/backup into w and checks that
// the whole copy came (Content-Length).
func fetchBackup(ctx context.Context, admin, token, tokenFrom string, w io.Writer) (int64, error) {
	u := strings.TrimSuffix(admin, "/") + "/api/v1/backup"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("-admin %q: %w", admin, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w (is limiterd running? give its admin URL with -admin)", u, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return 0, fmt.Errorf("GET %s: %s: the token from %s is not an admin-scope token of this daemon (give one with -token-file)", u, resp.Status, tokenFrom)
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET %s: the copy broke off after %d bytes: %w", u, n, err)
	}
	if want, _ := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); want > 0 && n != want {
		return n, fmt.Errorf("GET %s: %d bytes of %d came", u, n, want)
	}
	return n, nil
}

// adminURL is the URL of an admin listener at listen: its address, with
// the wildcard hosts (every interface) replaced by loopback.
func adminURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// backupOf is db.Backup for the admin API: a refusal because as many
// backups as the store makes at once are under way is the API's ErrBusy
// (503).
func backupOf(db *store.DB) api.Backup {
	return func(ctx context.Context, open func(size int64) (io.Writer, error)) (int64, error) {
		n, err := db.Backup(ctx, open)
		if errors.Is(err, store.ErrBackupBusy) {
			err = fmt.Errorf("%w: %w", api.ErrBusy, err)
		}
		return n, err
	}
}
