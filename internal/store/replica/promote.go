package replica

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// promotePrefix is etcd's peer endpoint for a member promote that a
// follower forwards to the leader: POST /members/promote/<id, decimal>.
const promotePrefix = "/members/promote/"

// promoteErrors are the errors a forwarded promote answers, by HTTP status
// and message (etcd's peerMemberPromoteHandler and promoteMemberHTTP).
var promoteErrors = []struct {
	status int
	err    error
}{
	{http.StatusNotFound, rpctypes.ErrGRPCMemberNotFound},
	{http.StatusPreconditionFailed, rpctypes.ErrGRPCLearnerNotReady},
	{http.StatusPreconditionFailed, rpctypes.ErrGRPCMemberNotLearner},
	{http.StatusPreconditionFailed, rpctypes.ErrGRPCMemberNotEnoughStarted},
	{http.StatusServiceUnavailable, rpctypes.ErrGRPCNotLeader},
}

// servePromote promotes a learner on behalf of a follower; only the leader
// does it.
func (r *Replica) servePromote(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(req.URL.Path, promotePrefix), 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("member id %q: %v", strings.TrimPrefix(req.URL.Path, promotePrefix), err), http.StatusBadRequest)
		return
	}
	err = rpctypes.ErrGRPCMemberNotFound
	if m := r.member(id); m != nil && !m.IsLearner {
		err = rpctypes.ErrGRPCMemberNotLearner
	} else if m != nil {
		err = r.promoteAsLeader(req.Context(), m)
	}
	if err == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	status := http.StatusInternalServerError
	for _, e := range promoteErrors {
		if err == e.err {
			status = e.status
		}
	}
	http.Error(w, rpctypes.ErrorDesc(err), status)
}

// forwardPromote asks the leader to promote learner id, through the
// leader's peer URLs, until it answers or ctx (bounded by the request
// timeout) ends; a leader change meanwhile is waited out, as etcd does.
func (r *Replica) forwardPromote(ctx context.Context, id uint64) error {
	tr, err := transportFor(r.cfg)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: tr, Timeout: r.requestTimeout()}
	ctx, cancel := context.WithTimeout(ctx, r.requestTimeout())
	defer cancel()
	lastErr := error(rpctypes.ErrGRPCNoLeader)
	for ctx.Err() == nil {
		if lead := r.member(r.lead.Load()); lead != nil && lead.ID != r.id {
			for _, u := range lead.PeerURLs {
				err := postPromote(ctx, client, u, id)
				if err == nil || err != rpctypes.ErrGRPCNotLeader && isPromoteError(err) {
					return err
				}
				lastErr = err
			}
		} else if lead != nil {
			return r.promoteAsLeader(ctx, r.member(id))
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		case <-r.stopc:
			return rpctypes.ErrGRPCStopped
		}
	}
	if lastErr == rpctypes.ErrGRPCNoLeader || lastErr == rpctypes.ErrGRPCNotLeader {
		return rpctypes.ErrGRPCTimeout
	}
	return lastErr
}

func postPromote(ctx context.Context, client *http.Client, peerURL string, id uint64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, peerURL+promotePrefix+strconv.FormatUint(id, 10), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("forward member promote to %s: %w", peerURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	for _, e := range promoteErrors {
		if resp.StatusCode == e.status && strings.Contains(string(body), rpctypes.ErrorDesc(e.err)) {
			return e.err
		}
	}
	return fmt.Errorf("forward member promote to %s: %s: %s", peerURL, resp.Status, strings.TrimSpace(string(body)))
}

func isPromoteError(err error) bool {
	for _, e := range promoteErrors {
		if err == e.err {
			return true
		}
	}
	return false
}
