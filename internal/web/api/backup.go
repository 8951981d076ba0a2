package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Backup writes a consistent copy of the database: it calls open with the
// copy's size in bytes, writes the copy to the writer open returns, and
// returns the bytes written. (*store.DB).Backup is one: a bbolt read
// transaction's WriteTo, which a snapshot being written at the same time
// does not disturb.
type Backup func(ctx context.Context, open func(size int64) (io.Writer, error)) (int64, error)

// backupIdle is how long a backup's client may take to read the next part
// of it before the connection is cut: the admin listener's WriteTimeout
// would cut a large backup to a remote machine at 120 s whatever its pace.
const backupIdle = time.Minute

// handleBackup streams a copy of the database (GET /api/v1/backup, scope
// admin). Unless ?snapshot=false, a snapshot is written first, so that
// the copy holds the peers' state as of now rather than of the last
// interval; a failed snapshot is logged and said in X-Limiterd-Snapshot,
// and the copy still made (it is consistent, only older).
func (a *API) handleBackup(w http.ResponseWriter, r *http.Request) {
	if a.opts.Backup == nil {
		writeError(w, http.StatusNotImplemented, "this daemon has no database to back up", "")
		return
	}
	snap := "skipped"
	switch v := r.URL.Query().Get("snapshot"); v {
	case "", "true":
		if a.opts.Snapshot != nil {
			snap = "written"
			if err := a.opts.Snapshot(r.Context()); err != nil {
				snap = "failed"
				a.log.Warn("backup: the snapshot before it failed; the copy holds the peers' state of the last snapshot", "err", err)
			}
		}
	case "false":
	default:
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("snapshot: must be true or false, got %q", v), "snapshot")
		return
	}
	start := time.Now()
	started := false
	n, err := a.opts.Backup(r.Context(), func(size int64) (io.Writer, error) {
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="limiterd-%s.db"`, a.now().UTC().Format("20060102T150405Z")))
		h.Set("Cache-Control", "no-store")
		h.Set("X-Limiterd-Snapshot", snap)
		w.WriteHeader(http.StatusOK)
		started = true
		return &idleWriter{w: w, rc: http.NewResponseController(w), idle: backupIdle}, nil
	})
	if err != nil {
		if !started {
			a.fail(w, r, err)
			return
		}
		// The status is sent: the connection closes short of
		// Content-Length, which every client takes as a failed download.
		a.log.Error("backup broken off", "actor", a.actor(r), "written", n, "err", err)
		return
	}
	a.log.Info("backup sent", "actor", a.actor(r), "bytes", n, "duration", time.Since(start).Round(time.Millisecond), "snapshot", snap)
}

// idleWriter moves the connection's write deadline idle past each write
// once a quarter of it is used up: a response as long as it takes while
// the client reads, cut off when it stops.
type idleWriter struct {
	w        io.Writer
	rc       *http.ResponseController
	idle     time.Duration
	deadline time.Time
}

func (w *idleWriter) Write(b []byte) (int, error) {
	if now := time.Now(); w.deadline.Sub(now) < w.idle*3/4 {
		w.deadline = now.Add(w.idle)
		_ = w.rc.SetWriteDeadline(w.deadline) // unsupported: the server's stays
	}
	return w.w.Write(b)
}
