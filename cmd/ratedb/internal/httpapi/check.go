package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// Limits on a check request, documented in the README.
const (
	// MaxCheckBody is the largest /v1/check body, in bytes (413 above).
	MaxCheckBody = 8 << 10
	// MaxCost is the largest cost of one check.
	MaxCost = 1_000_000
	// MaxIDLen is the longest client_id or route, in bytes.
	MaxIDLen = rules.MaxPatternLen
)

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	ClientID string `json:"client_id"`
	Route    string `json:"route"`
	// Cost is optional: absent means 1.
	Cost *int64 `json:"cost"`
}

// checkFields are CheckRequest's JSON names, for checkStrict.
var checkFields = strictFields{"client_id": nil, "route": nil, "cost": nil}

// errBadRequest marks decoding errors the client can fix (400).
var errBadRequest = errors.New("bad request")

// DecodeCheck decodes and validates a check body: exactly one JSON object in
// valid UTF-8, whose members are named exactly client_id, route and cost,
// each at most once; client_id and route of 1 to MaxIDLen bytes, without
// U+FFFD (which a literal U+FFFD, "\ufffd" or an escaped lone surrogate such
// as "\ud800" would give: all are refused); cost from 1 to MaxCost (default
// 1). Its errors wrap errBadRequest and name no value.
func DecodeCheck(body []byte) (client, route string, cost int64, err error) {
	var req CheckRequest
	if c, r, n, hasCost, ok := decodeCheckFast(body); ok {
		req.ClientID, req.Route = c, r
		if hasCost {
			req.Cost = &n
		}
		return validateCheck(req, nil)
	}
	req, bad, err := decodeCheckFields(body)
	if err != nil {
		return "", "", 0, err
	}
	return validateCheck(req, bad)
}

// decodeCheckJSON decodes a check body with encoding/json, after
// checkStrict.
func decodeCheckJSON(body []byte) (CheckRequest, error) {
	req, bad, err := decodeCheckFields(body)
	if err == nil && len(bad) > 0 {
		_, _, _, err = validateCheck(req, bad)
	}
	return req, err
}

// decodeCheckFields decodes a check body after checkStrict, each member on
// its own, so that a value of the wrong type is one problem among the
// others: bad maps the name of each such member to its problem.
func decodeCheckFields(body []byte) (req CheckRequest, bad map[string]string, err error) {
	if err := checkStrict(body, checkFields); err != nil {
		return req, nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	// checkStrict refused unknown, misspelt and repeated members.
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return req, nil, fmt.Errorf("%w: %s", errBadRequest, describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, nil, fmt.Errorf("%w: data after the JSON object", errBadRequest)
	}
	decode := func(name string, dst any, want string) {
		if v, ok := raw[name]; ok && json.Unmarshal(v, dst) != nil {
			if bad == nil {
				bad = make(map[string]string)
			}
			bad[name] = name + " must be " + want
		}
	}
	decode("client_id", &req.ClientID, "a string")
	decode("route", &req.Route, "a string")
	decode("cost", &req.Cost, fmt.Sprintf("an integer from 1 to %d", MaxCost))
	return req, bad, nil
}

// validateCheck checks a decoded check body's fields; bad holds the
// problems of members whose value had the wrong type.
func validateCheck(req CheckRequest, bad map[string]string) (client, route string, cost int64, err error) {
	var problems []string
	if p, ok := bad["client_id"]; ok {
		problems = append(problems, p)
	} else if req.ClientID == "" {
		problems = append(problems, "client_id is missing or empty")
	} else if len(req.ClientID) > MaxIDLen {
		problems = append(problems, fmt.Sprintf("client_id is longer than %d bytes", MaxIDLen))
	}
	if p, ok := bad["route"]; ok {
		problems = append(problems, p)
	} else if req.Route == "" {
		problems = append(problems, "route is missing or empty")
	} else if len(req.Route) > MaxIDLen {
		problems = append(problems, fmt.Sprintf("route is longer than %d bytes", MaxIDLen))
	}
	cost = 1
	if p, ok := bad["cost"]; ok {
		problems = append(problems, p)
	} else if req.Cost != nil {
		cost = *req.Cost
		if cost <= 0 || cost > MaxCost {
			problems = append(problems, fmt.Sprintf("cost must be between 1 and %d", MaxCost))
		}
	}
	if len(problems) > 0 {
		return "", "", 0, fmt.Errorf("%w: %s", errBadRequest, joinProblems(problems))
	}
	return req.ClientID, req.Route, cost, nil
}

// describeJSONError says what is wrong with a body without quoting it.
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s must be a %s", te.Field, te.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is empty or cut short"
	}
	// encoding/json says `json: unknown field "x"`, quoting the body: never
	// pass its message on. (checkStrict refuses unknown fields first.)
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return "unknown field"
	}
	return "malformed request"
}

func joinProblems(p []string) string {
	var b bytes.Buffer
	for i, s := range p {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// check serves POST /v1/check.
func (s *Server) check(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if s.role(r) == keys.None {
		writeError(w, http.StatusUnauthorized, "missing or unknown API key (X-API-Key)", nil)
		return
	}
	body, ok := readBody(w, r, MaxCheckBody)
	if !ok {
		return
	}
	client, route, cost, err := DecodeCheck(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	rule, _ := s.opts.Rules.Current().Match(client, route)
	d, err := s.opts.Core.Decide(r.Context(), core.Check{Limit: rule.Limit(), Key: rule.Key(client, route), Cost: cost})
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	if d.FailedOpen {
		// As storeFailed logs, one line a second.
		if ok, held := s.storeLog.Allow(); ok {
			s.opts.Logger.Warn("check failed open: the store failed; allowed without a decision", "err", d.StoreErr, "similar_lines_held_back", held)
		}
	}
	if s.opts.LogKeys {
		s.opts.Logger.Debug("check", "client_id", client, "route", route, "rule", rule.Name, "allowed", d.Allowed)
	}
	s.writeDecision(w, rule, d)
}

// storeFailed answers a decision that could not be made. A client that
// gave up (core.CallerGaveUp: it went away) gets no answer and the store's
// error is not logged: the store's call ended because the request did.
func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	if core.CallerGaveUp(r.Context()) != nil {
		return // the client went away
	}
	// One line a second: while the store is down every check fails, and
	// a line each would let clients fill the log.
	if ok, held := s.storeLog.Allow(); ok {
		s.opts.Logger.Error("check failed: the store failed", "err", err, "similar_lines_held_back", held)
	}
	msg := "the store failed; no decision was made"
	if errors.Is(err, ratedb.ErrUnavailable) {
		msg = "the store is unavailable; no decision was made"
	}
	writeError(w, http.StatusServiceUnavailable, msg, nil)
}

// writeDecision writes the reference service's decision body, byte for
// byte: {"meta":{...},"data":{"status":"Allow","limit":100,"remain":99,"reset_in_second":41}}
// plus "tiers" for a layered rule.
func (s *Server) writeDecision(w http.ResponseWriter, rule *rules.Rule, d core.Decision) {
	now := s.now()
	code := http.StatusOK
	if !d.Allowed {
		code = s.opts.DenyStatus
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"meta":{"message":"success","code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"status":"ok"},"data":{"status":"`...)
	if d.Allowed {
		b = append(b, "Allow"...)
	} else {
		b = append(b, "Deny"...)
	}
	if d.FailedOpen {
		// No decision was made: report the rule's limit, untouched; for a
		// layered rule the binding tier (nothing counted: the smallest
		// limit, the least room) and every tier.
		l := rule.Tiers[0].Limit
		for _, t := range rule.Tiers[1:] {
			l = min(l, t.Limit)
		}
		b = append(b, `","limit":`...)
		b = strconv.AppendInt(b, l, 10)
		b = append(b, `,"remain":`...)
		b = strconv.AppendInt(b, l, 10)
		b = append(b, `,"reset_in_second":0`...)
		if rule.Layered {
			b = append(b, `,"tiers":[`...)
			for i, t := range rule.Tiers {
				b = appendTier(b, i, t.Limit, t.Limit, 0, t.Scale)
			}
			b = append(b, ']')
		}
		b = append(b, `,"fail_open":true}}`...)
		w.Header()["X-Ratedb-Fail-Open"] = []string{"true"}
		writeBytes(w, code, b)
		return
	}
	res := d.Results[0].Result
	if !d.Allowed && res.RetryAfter > 0 {
		// The store's own time of the decision (Redis's TIME, the DB's
		// clock), so that reset_in_second and Retry-After agree whatever
		// this host's clock reads.
		now = res.ResetAt.Add(-res.RetryAfter)
	}
	b = append(b, `","limit":`...)
	b = strconv.AppendInt(b, res.Limit, 10)
	b = append(b, `,"remain":`...)
	b = strconv.AppendInt(b, res.Remaining, 10)
	b = append(b, `,"reset_in_second":`...)
	b = strconv.AppendInt(b, resetSeconds(res.ResetAt, now, res.Scale), 10)
	if res.Tiers != nil {
		b = append(b, `,"tiers":[`...)
		for i, t := range res.Tiers {
			b = appendTier(b, i, t.Limit, t.Remaining, resetSeconds(t.ResetAt, now, t.Scale), t.Scale)
		}
		b = append(b, ']')
	}
	b = append(b, "}}"...)
	if !d.Allowed {
		w.Header()["Retry-After"] = []string{strconv.FormatInt(max(1, ceilSeconds(res.RetryAfter)), 10)}
	}
	writeBytes(w, code, b)
}

// resetSeconds is the whole seconds from now until a window of scale ends
// at end, rounded up: at least 1, since the store decided while the window
// was open, and at most the scale, since no window ends more than one scale
// after its decision (a store clock ahead of or behind now must not
// announce a wait the window cannot have).
func resetSeconds(end, now time.Time, scale time.Duration) int64 {
	return min(max(1, ceilSeconds(end.Sub(now))), max(1, ceilSeconds(scale)))
}

// ceilSeconds is d in whole seconds, rounded up, never negative.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// readBody reads at most limit bytes of the body; over that it answers 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", limit), nil)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", limit), nil)
		} else {
			writeError(w, http.StatusBadRequest, "could not read the body", nil)
		}
		return nil, false
	}
	return body, true
}

// appendTier appends the JSON object of tier i of a "tiers" array, after a
// comma unless it is the first.
func appendTier(b []byte, i int, limit, remain, resetSeconds int64, scale time.Duration) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, `{"limit":`...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, `,"remain":`...)
	b = strconv.AppendInt(b, remain, 10)
	b = append(b, `,"reset_in_second":`...)
	b = strconv.AppendInt(b, resetSeconds, 10)
	b = append(b, `,"window":"`...)
	b = append(b, scale.String()...)
	return append(b, `"}`...)
}
