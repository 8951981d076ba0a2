package live

import (
	"context"
	"errors"
	"strings"
	"time"
)

// AuditQuery selects audit entries (GET /api/v1/audit). The zero value
// selects the 100 newest.
type AuditQuery struct {
	// Limit is the most entries returned; 0 means 100.
	Limit int
	// Before returns entries with IDs below it (0: from the newest).
	Before uint64
	// Action keeps the entries of this action ("exemption.add") or family
	// ("exemption": add, remove, expire); "" keeps all.
	Action string
	// Actor keeps the entries of this actor exactly ("token:nginx",
	// "api-token", "session:1a2b3c4d"); "" keeps all.
	Actor string
	// Since keeps the entries at or after it; zero keeps all.
	Since time.Time
}

// auditScanMax bounds how many entries one query reads looking for
// matches: a filter that matches nothing in a long log answers with a
// cursor (AuditPage.Next) rather than reading the whole log.
const auditScanMax = 20000

// auditPageSize is how many entries a query reads from the store at a
// time.
const auditPageSize = 500

// AuditPage is the answer to an AuditQuery: the entries, newest first,
// and, when more may match beyond them, the Before of the next page.
type AuditPage struct {
	Entries []AuditEntry
	Next    uint64
}

// AuditIndex is a Store whose audit log is indexed by action and actor
// (the bbolt store): a query filtered by them reads only what matches.
type AuditIndex interface {
	// AuditMatching returns up to limit entries with IDs below before (0:
	// the newest), newest first, of the action or its family and of the
	// actor ("": any), reading at most scan index entries: next is then
	// the before to go on from (0: all was read). ErrNoAuditIndex: no
	// index; the log is scanned.
	AuditMatching(ctx context.Context, action, actor string, limit, scan int, before uint64) (entries []AuditEntry, next uint64, err error)
}

// ErrNoAuditIndex: the store's audit log has no index (yet).
var ErrNoAuditIndex = errors.New("the audit log has no index")

// matches reports whether a passes q's filters (Since aside).
func (q AuditQuery) matches(a AuditEntry) bool {
	if q.Action != "" && a.Action != q.Action && !strings.HasPrefix(a.Action, q.Action+".") {
		return false
	}
	return q.Actor == "" || a.Actor == q.Actor
}

// QueryAudit returns the audit entries q selects, newest first. With an
// action or actor and a store that indexes them (AuditIndex), it reads
// only the entries they match; otherwise the log, newest first. It stops
// at Since, at Limit matches, or after auditScanMax entries read (then
// Next says where to go on), or when ctx ends (an expensive call's time
// bound: then with what it has and Next).
func (c *Live) QueryAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	var page AuditPage
	if ix, ok := c.store.(AuditIndex); ok && (q.Action != "" || q.Actor != "") {
		entries, next, err := ix.AuditMatching(ctx, q.Action, q.Actor, q.Limit, auditScanMax, q.Before)
		switch {
		case errors.Is(err, ErrNoAuditIndex):
		case err != nil:
			return page, err
		default:
			for i, a := range entries {
				if !q.Since.IsZero() && a.Time.Before(q.Since) {
					page.Entries = entries[:i]
					return page, nil
				}
			}
			page.Entries, page.Next = entries, next
			if len(entries) == q.Limit {
				page.Next = entries[len(entries)-1].ID
			}
			return page, nil
		}
	}
	before, scanned := q.Before, 0
	for {
		batch, err := c.store.Audit(ctx, auditPageSize, before)
		if err != nil {
			if ctx.Err() != nil && scanned > 0 {
				page.Next = before // out of time: go on from here
				return page, nil
			}
			return page, err
		}
		for _, a := range batch {
			scanned++
			if !q.Since.IsZero() && a.Time.Before(q.Since) {
				return page, nil
			}
			if q.matches(a) {
				page.Entries = append(page.Entries, a)
				if len(page.Entries) == q.Limit {
					page.Next = a.ID
					return page, nil
				}
			}
			before = a.ID
			if scanned >= auditScanMax {
				page.Next = a.ID
				return page, nil
			}
		}
		if len(batch) < auditPageSize {
			return page, nil
		}
	}
}
