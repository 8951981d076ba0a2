package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Backup writes a consistent copy of the database while it is in use
// (bbolt's online backup: one read transaction's Tx.WriteTo). Writes made
// meanwhile — a snapshot, a live edit — do not disturb it: the copy is
// the database as of the transaction's start, a valid limiterd database of
// this schema, which Open accepts as it is. open is called with the copy's
// size in bytes and returns where to write it. Backup returns the bytes
// written; ctx ending stops the copy at the next write.
//
// The copy is first written to a temporary file beside the database,
// which takes as long as the local disk does, and only then to the
// writer, which may be a slow client: the read transaction, which keeps
// the pages it reads from being reused (so the database file grows by
// what is written meanwhile), is held for the first part only. At most
// maxBackups copies are made at once; another is refused with
// ErrBackupBusy.
func (db *DB) Backup(ctx context.Context, open func(size int64) (io.Writer, error)) (int64, error) {
	select {
	case db.backups <- struct{}{}:
		defer func() { <-db.backups }()
	default:
		return 0, ErrBackupBusy
	}
	f, err := os.CreateTemp(filepath.Dir(db.path), ".limiterd-backup-*")
	if err != nil {
		return 0, fmt.Errorf("back up the database: %w", err)
	}
	// Unlinked at once: its data lives while f is open, and nothing is left
	// behind whatever happens next.
	_ = os.Remove(f.Name())
	defer f.Close()
	var size int64
	err = db.view(ctx, "back up the database", func(tx *bbolt.Tx) error {
		var err error
		size, err = tx.WriteTo(ctxWriter{ctx: ctx, w: f})
		if err != nil && ctx.Err() != nil {
			err = ctx.Err() // bbolt formats the writer's error with %s
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("back up the database: %w", err)
	}
	w, err := open(size)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(ctxWriter{ctx: ctx, w: w}, io.LimitReader(f, size))
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return n, err
}

// maxBackups bounds the copies Backup makes at once: each is a temporary
// file the size of the database, and the work of a read of all of it.
const maxBackups = 2

// ctxWriter fails its writes once ctx has ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(b)
}

// writeProbeEvery is how old the last write's outcome may be before
// Writable tries a write of its own.
const writeProbeEvery = 10 * time.Second

// writeState is the outcome of the last write that reached the disk (or
// failed to): what Writable answers between probes.
type writeState struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// record notes the outcome of a write transaction: a success, or a
// failure of the disk or the file (an I/O error, a closed or read-only
// database). Other errors — a value refused inside the transaction — say
// nothing of the disk and are not recorded.
func (w *writeState) record(err error) {
	if err != nil && !isWriteFailure(err) {
		return
	}
	w.mu.Lock()
	w.at, w.err = time.Now(), err
	w.mu.Unlock()
}

// isWriteFailure reports whether err says the database cannot be written.
func isWriteFailure(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno) ||
		errors.Is(err, berrors.ErrDatabaseNotOpen) || errors.Is(err, berrors.ErrDatabaseReadOnly) ||
		strings.Contains(err.Error(), "mmap") || strings.Contains(err.Error(), "file resize")
}

// Writable reports whether the database can be written: the outcome of
// the last write if it is recent (a snapshot every few seconds answers
// for it), else that of a write of its own — an empty write transaction,
// which writes a freelist and a meta page and syncs them. A full disk, a
// file system remounted read-only, a closed or read-only database: an
// error saying so. For readiness probes: it writes at most once every 10 s.
func (db *DB) Writable(ctx context.Context) error {
	db.writes.mu.Lock()
	at, err := db.writes.at, db.writes.err
	db.writes.mu.Unlock()
	if !at.IsZero() && time.Since(at) < writeProbeEvery {
		if err != nil {
			return fmt.Errorf("database %s cannot be written: %w", db.path, err)
		}
		return nil
	}
	if err := db.update(ctx, "write probe", func(*bbolt.Tx) error { return nil }); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("database %s cannot be written: %w", db.path, err)
	}
	return nil
}

// Ready is Check and Writable: the database can be read, is of this
// schema, and can be written (GET /readyz, docs/api.md; decision 114).
func (db *DB) Ready(ctx context.Context) error {
	if err := db.Check(ctx); err != nil {
		return err
	}
	return db.Writable(ctx)
}
