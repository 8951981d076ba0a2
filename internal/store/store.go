// Package store is limiterd's embedded database: one bbolt file holding the
// operators' live settings (overrides, exemptions, the global switch), the
// audit log of their changes, and the limiter's per-peer state as saved by
// snapshots, so that a restart forgets neither.
//
// Open verifies the file before writing to it, takes bbolt's exclusive
// lock (one process at a time), and runs the missing schema migrations
// (package migrations). Every method that changes something has committed
// it (fsync) when it returns.
//
// # Layout (schema version 7)
//
//	meta/schema_version        uint64 BE: len(migrations.All) when current
//	live/disabled              JSON boolean: the global switch is off
//	live/record_clock          the greatest stamp of the live records made
//	                           or seen (cluster mode; records.go)
//	live_records/<field>       JSON live.Record: a field of the live state
//	                           (live.Fields), its value or removal and the
//	                           stamp of the edit that made it (cluster mode)
//	overrides/<group>          JSON live.Override
//	exemptions/<uint64 BE>     JSON live.Exemption, in order of addition
//	audit/<uint64 BE id>       JSON live.AuditEntry; ids from NextSequence
//	entry_base/<uint64 BE>     blob (see blob.go): the entries of the last
//	                           full save, in key order (group, peer key)
//	entry_log/<uint64 BE seq><uint32 BE part>
//	                           blob: the deletions and changes of one
//	                           incremental save since, in key order
//	groups/<group>             JSON limiter.GroupSnapshot (tick phase)
//	snapshot/header            JSON {taken_at_ms, enabled}
//	snapshot/throttle          JSON: the throttle's (throttle.Snapshot)
//	sessions/<SHA-256 of an id> the dashboard's sessions (opaque)
//	offenders/<peer key><group> the record of offenders (offenses.go)
//
// The (peer, group) entries are not one key each: a full save writes them
// all as a new base of large blobs (sequential writes of a few hundred
// values), an incremental save appends one record to the log (the blobs
// its changes fill, whatever the population), and a load reads the base
// and applies the log in order. Each save is one transaction, so the file always holds
// a whole base and whole log records. When the log has grown past a third
// of the base, SaveDelta says so (SaveStats.Compact) and the next full save
// replaces both.
package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/limiterd/limiterd/internal/migrations"
)

// Errors of Open, for errors.Is.
var (
	// ErrLocked: another process (a running limiterd?) holds the
	// database's lock, and Options.Timeout passed.
	ErrLocked = errors.New("database is locked by another process")
	// ErrCorrupt: the file is not a bbolt database, or not limiterd's, or
	// it is damaged (bad meta pages, truncated, inconsistent pages). Open
	// left it exactly as it was.
	ErrCorrupt = errors.New("not a valid limiterd database")
	// ErrTooNew: the database was written by a newer limiterd (its schema
	// version is above len(migrations.All)). Open left it as it was.
	ErrTooNew = errors.New("database schema is newer than this limiterd")
	// ErrNeedsMigration: a read-only Open found an older schema, which only
	// a read-write Open can migrate.
	ErrNeedsMigration = errors.New("database schema needs migrating")
)

// ErrBackupBusy is Backup's answer while maxBackups copies are being made.
var ErrBackupBusy = errors.New("as many backups as limiterd makes at once are being made: try again when one ends")

// Bucket names and fixed keys.
var (
	bucketMeta       = []byte("meta")
	bucketLive       = []byte("live")
	bucketOverrides  = []byte("overrides")
	bucketExemptions = []byte("exemptions")
	bucketAudit      = []byte("audit")
	bucketBase       = []byte("entry_base")
	bucketLog        = []byte("entry_log")
	bucketGroups     = []byte("groups")
	bucketSnapshot   = []byte("snapshot")
	bucketSessions   = []byte("sessions")
	bucketOffenders  = []byte("offenders")
	// bucketRecords, keyRecordClock: records.go.

	keySchemaVersion = []byte("schema_version")
	keyDisabled      = []byte("disabled")
	keyHeader        = []byte("header")
)

// allBuckets is every bucket of the current schema.
var allBuckets = [][]byte{bucketMeta, bucketLive, bucketOverrides, bucketExemptions, bucketAudit, bucketBase, bucketLog, bucketGroups, bucketSnapshot, bucketSessions, bucketOffenders, bucketRecords}

// DefaultTimeout is how long Open waits for the file lock by default.
const DefaultTimeout = time.Second

// Options configure Open.
type Options struct {
	// Timeout bounds the wait for the file lock held by another process;
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// ReadOnly opens the database without writing to it (a shared lock:
	// other read-only openers may hold it too). It must exist and be at the
	// current schema version; the methods that write fail.
	ReadOnly bool
	// Logger receives migrations and records skipped as undecodable; nil
	// discards.
	Logger *slog.Logger
	// CheckThrottle checks the outbound throttle's state in a document
	// given to Import (package throttle's CheckSnapshot: the store keeps
	// that state as the throttle's JSON, without knowing its shape); nil
	// takes any JSON value.
	CheckThrottle func(state []byte) error
}

// DB is limiterd's bbolt database. It is safe for concurrent use; writes
// are serialised by bbolt, reads run in parallel with them.
type DB struct {
	bolt          *bbolt.DB
	path          string
	log           *slog.Logger
	checkThrottle func([]byte) error
	// writes is the outcome of the last write, for Writable.
	writes writeState
	// auditMax bounds the audit log (SetAuditMax; 0: unbounded); pruned
	// counts the entries it removed.
	auditMax, pruned atomic.Uint64
	// backups holds a token per copy Backup is making (maxBackups).
	backups chan struct{}
	// recorder stamps the live edits (SetRecorder; cluster mode).
	recorder atomic.Pointer[recorderBox]
}

// errorWith is an error with its own message that wraps one or more
// sentinels and causes (for errors.Is) without repeating their text.
type errorWith struct {
	msg  string
	errs []error
}

func (e *errorWith) Error() string   { return e.msg }
func (e *errorWith) Unwrap() []error { return e.errs }

func corrupt(path string, cause error, format string, args ...any) error {
	msg := fmt.Sprintf("open %s: not a valid limiterd database: %s (the file was left as it is: move it aside to start afresh, or restore a backup)", path, fmt.Sprintf(format, args...))
	errs := []error{ErrCorrupt}
	if cause != nil {
		errs = append(errs, cause)
	}
	return &errorWith{msg: msg, errs: errs}
}

func locked(path string, timeout time.Duration, cause error) error {
	return &errorWith{
		msg:  fmt.Sprintf("open %s: another process (a running limiterd?) holds the database; gave up after %s", path, timeout),
		errs: []error{ErrLocked, cause},
	}
}

func tooNew(path string, v uint64) error {
	return &errorWith{
		msg: fmt.Sprintf("open %s: its schema version is %d, newer than this limiterd's (%d): a newer limiterd wrote it; the file was left as it is: run that limiterd, or this one on the backup taken before the upgrade (docs/operations.md, \"Upgrades\")",
			path, v, len(migrations.All)),
		errs: []error{ErrTooNew},
	}
}

// Open opens (creating it, mode 0600, and its directory, 0700, if absent)
// the database at path, normally <data_dir>/limiterd.db, and brings its
// schema up to date.
//
// An existing file is first opened read-only and verified: both meta pages
// bad (not a bbolt file, bad magic or checksum), a file shorter than its
// meta page says (truncated), pages that fail bbolt's consistency check, a
// bbolt file of another program (buckets but no schema version), or a
// schema newer than this build: Open fails (ErrCorrupt, ErrTooNew) and the
// file is left byte for byte as it was. A 0-byte file holds no data: like a
// missing one, it is initialised as a new database.
//
// A lock held by another process for longer than opts.Timeout gives
// ErrLocked.
func Open(path string, opts Options) (*DB, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("open %s: is a directory", path)
	case err == nil && fi.Size() > 0:
		if err := verify(path, opts); err != nil {
			return nil, err
		}
	case err == nil && opts.ReadOnly:
		return nil, fmt.Errorf("open %s: the file is empty: there is no database to read", path)
	case errors.Is(err, fs.ErrNotExist) && !opts.ReadOnly:
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	b, err := bbolt.Open(path, 0o600, boltOptions(opts))
	if err != nil {
		return nil, openError(path, opts.Timeout, err)
	}
	b.AllocSize = allocSize
	db := &DB{bolt: b, path: path, log: log, checkThrottle: opts.CheckThrottle, backups: make(chan struct{}, maxBackups)}
	if opts.ReadOnly {
		err = db.checkCurrent()
	} else if err = db.migrate(); err == nil {
		err = db.keepAuditIndex()
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return db, nil
}

// initialMmapSize is the address space mapped at open on 64-bit systems
// other than Windows (where bbolt would grow the file to it): growing the
// map in a write transaction makes bbolt copy every key and value of the
// transaction's nodes out of the old map, which for a full save of a
// million entries cost seconds. Mapping costs address space, not memory.
const initialMmapSize = 1 << 30

// allocSize is the step the file grows by when it must (bbolt's default,
// 16 MiB, would be the size of the smallest database, the map being
// larger than it).
const allocSize = 4 << 20

func boltOptions(opts Options) *bbolt.Options {
	o := &bbolt.Options{
		Timeout:      opts.Timeout,
		ReadOnly:     opts.ReadOnly,
		FreelistType: bbolt.FreelistMapType,
	}
	if runtime.GOOS != "windows" && strconv.IntSize == 64 {
		o.InitialMmapSize = initialMmapSize
	}
	return o
}

// openError classifies an error of bbolt.Open.
func openError(path string, timeout time.Duration, err error) error {
	var pe *fs.PathError
	var errno syscall.Errno
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return locked(path, timeout, err)
	case errors.As(err, &pe), errors.As(err, &errno):
		return fmt.Errorf("open %s: %w", path, err)
	case errors.Is(err, berrors.ErrInvalid):
		return corrupt(path, err, "no valid meta page: not a bbolt file, or both its meta pages are damaged")
	case errors.Is(err, berrors.ErrChecksum):
		return corrupt(path, err, "the meta pages fail their checksum: damaged")
	case errors.Is(err, berrors.ErrVersionMismatch):
		return corrupt(path, err, "the meta pages have an unknown bbolt format version")
	default:
		// "file size too small", and whatever else bbolt finds wrong.
		return corrupt(path, err, "%v", err)
	}
}

// verify opens an existing, non-empty file read-only and checks it, so that
// a file that is damaged, foreign or too new is never written to.
func verify(path string, opts Options) error {
	ro := boltOptions(opts)
	ro.ReadOnly = true
	b, err := bbolt.Open(path, 0o600, ro)
	if err != nil {
		return openError(path, opts.Timeout, err)
	}
	defer b.Close()
	return b.View(func(tx *bbolt.Tx) error {
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		// Nothing may be read past the end of the file: the pages there
		// are not mapped to anything and touching them faults.
		if fi.Size() < tx.Size() {
			return corrupt(path, nil, "the file is %d bytes but its meta page says %d: truncated", fi.Size(), tx.Size())
		}
		var problems []error
		for err := range tx.Check() {
			problems = append(problems, err)
		}
		if len(problems) > 0 {
			return corrupt(path, errors.Join(problems...), "bbolt's consistency check failed (%d problems), the first: %v", len(problems), problems[0])
		}
		v, err := readVersion(tx)
		if err != nil {
			return corrupt(path, err, "%v", err)
		}
		if v > uint64(len(migrations.All)) {
			return tooNew(path, v)
		}
		if v == 0 {
			// A limiterd database has its version from its first
			// transaction on; buckets without one are another program's.
			c := tx.Cursor()
			if k, _ := c.First(); k != nil {
				return corrupt(path, nil, "it has bucket %q but no schema version: another program's bbolt file?", k)
			}
		}
		return nil
	})
}

// readVersion returns the schema version, 0 for a new database.
func readVersion(tx *bbolt.Tx) (uint64, error) {
	m := tx.Bucket(bucketMeta)
	if m == nil {
		return 0, nil
	}
	v := m.Get(keySchemaVersion)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("meta/schema_version is %d bytes, not 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func (db *DB) version() (uint64, error) {
	var v uint64
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		v, err = readVersion(tx)
		return err
	})
	return v, err
}

// migrate runs the missing migrations, one Update each with its version
// bump.
func (db *DB) migrate() error {
	v, err := db.version()
	if err != nil {
		return corrupt(db.path, err, "%v", err)
	}
	n := uint64(len(migrations.All))
	if v > n {
		return tooNew(db.path, v)
	}
	for ; v < n; v++ {
		m := migrations.All[v]
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			if err := m.Up(tx); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return meta.Put(keySchemaVersion, binary.BigEndian.AppendUint64(nil, v+1))
		})
		if err != nil {
			return fmt.Errorf("open %s: migrate to schema version %d (%s): %w", db.path, v+1, m.Name, err)
		}
		db.log.Info("database migrated", "path", db.path, "schema_version", v+1, "migration", m.Name)
	}
	return db.bolt.View(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				return corrupt(db.path, nil, "bucket %s is missing", name)
			}
		}
		return nil
	})
}

// checkCurrent refuses, for a read-only open, a schema it cannot read.
func (db *DB) checkCurrent() error {
	v, err := db.version()
	if err != nil {
		return corrupt(db.path, err, "%v", err)
	}
	if n := uint64(len(migrations.All)); v < n {
		return &errorWith{
			msg:  fmt.Sprintf("open %s: schema version %d is older than this limiterd's (%d): open it read-write once to migrate it", db.path, v, n),
			errs: []error{ErrNeedsMigration},
		}
	}
	return nil
}

// Close closes the database, waiting for transactions in progress.
func (db *DB) Close() error { return db.bolt.Close() }

// Path returns the file's path.
func (db *DB) Path() string { return db.path }

// Size returns the file's size in bytes (0 if it cannot be read).
func (db *DB) Size() int64 {
	fi, err := os.Stat(db.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Check reports whether the database can be read: a cheap View, for
// readiness probes.
func (db *DB) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := db.version()
	if err != nil {
		return fmt.Errorf("database %s: %w", db.path, err)
	}
	if v != uint64(len(migrations.All)) {
		return fmt.Errorf("database %s: schema version %d, want %d", db.path, v, len(migrations.All))
	}
	return nil
}
