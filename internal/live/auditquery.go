package live

import (
	"context"
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

// matches reports whether a passes q's filters (Since aside).
func (q AuditQuery) matches(a AuditEntry) bool {
	if q.Action != "" && a.Action != q.Action && !strings.HasPrefix(a.Action, q.Action+".") {
		return false
	}
	return q.Actor == "" || a.Actor == q.Actor
}

// QueryAudit returns the audit entries q selects, newest first. It reads
// the log newest first and stops at Since, at Limit matches, or after
// auditScanMax entries (then Next says where to go on).
func (c *Live) QueryAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	var page AuditPage
	before, scanned := q.Before, 0
	for {
		batch, err := c.store.Audit(ctx, auditPageSize, before)
		if err != nil {
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
