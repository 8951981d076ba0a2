package web

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/limiterd/limiterd/insight"
	"github.com/limiterd/limiterd/jsonbody"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/live"
)

// errBadRequest marks a request the admin listener cannot read at all.
var errBadRequest = errors.New("bad request")

// statusOf maps an error to the status the admin API and the dashboard
// answer it with, and the request field at fault when one is named: the
// one place that does (SPEC §7). An error it does not know is a 500.
func statusOf(err error) (status int, field string) {
	var fe *live.FieldError
	var uf *jsonbody.UnknownFieldError
	var qe *insight.QueryError
	var se *limiter.SettingError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &fe):
		return http.StatusUnprocessableEntity, fe.Field
	case errors.As(err, &uf):
		return http.StatusUnprocessableEntity, uf.Field
	case errors.As(err, &qe):
		return http.StatusUnprocessableEntity, qe.Field
	case errors.As(err, &se):
		return http.StatusUnprocessableEntity, se.Key
	case errors.As(err, &syn), errors.As(err, &typ), errors.Is(err, errBadRequest), errors.Is(err, jsonbody.ErrBadBody):
		return http.StatusBadRequest, ""
	case errors.Is(err, live.ErrNotFound):
		return http.StatusNotFound, ""
	case errors.Is(err, live.ErrExists):
		return http.StatusConflict, ""
	}
	return http.StatusInternalServerError, ""
}
