package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// memberStatusScript asks the node's own store member for its status
// (mode, leader, last pause) with the binary its unit runs and the client
// certificate kube-apiserver uses; exit 3 while the unit runs no process.
const memberStatusScript = `pid=$(systemctl show -p MainPID --value quantykube-store)
[ "${pid:-0}" != 0 ] || { echo "quantykube-store runs no process"; exit 3; }
exec /proc/$pid/exe store mirror status --endpoints https://127.0.0.1:2479 \
  --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/apiserver-etcd-client.crt \
  --key /etc/kubernetes/pki/apiserver-etcd-client.key --command-timeout 5s --json`

// memberStatus is node's store member as it answers for itself.
func (h *haCluster) memberStatus(node string) (*api.Status, error) {
	out, err := h.Exec(node, "sh", "-c", memberStatusScript)
	if err != nil {
		return nil, fmt.Errorf("store status on %s: %w: %s", node, err, strings.TrimSpace(out))
	}
	var all []*api.Status
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &all); err != nil || len(all) != 1 {
		return nil, fmt.Errorf("store status on %s printed %q (%v)", node, out, err)
	}
	return all[0], nil
}

// leaderKill is what killing the store's leader did.
type leaderKill struct {
	step   string    // the HA step under way ("switch/qk2-cp2")
	at     time.Time // when SIGKILL was sent
	node   string    // the leader's node
	member string    // its member name
	pid    string    // the process killed
	// back is until the unit ran a new process whose member answers;
	// elected until a member of the others reported itself leader.
	back, elected time.Duration
	newLeader     string
	err           error // why the kill or its aftermath failed, if it did
}

// leaderKillTimeout bounds each wait of killLeader: the unit restarts
// after 1 s (Restart=always, RestartSec=1s) and raft elects within a few
// seconds; a loaded machine is given far more.
const leaderKillTimeout = 2 * time.Minute

// killLeader finds the store's leader (the member that says it is, asked on
// every control plane), sends its process SIGKILL on its node, and waits
// until a leader is elected among the others and the killed member's unit
// has brought it back by itself. It never fails the test itself (it runs
// beside follow): the outcome is in the result.
func (h *haCluster) killLeader(step string) leaderKill {
	k := leaderKill{step: step}
	deadline := time.Now().Add(leaderKillTimeout)
	for k.node == "" {
		for _, cp := range h.cps {
			if st, err := h.memberStatus(cp); err == nil && st.IsLeader {
				k.node, k.member = cp, st.Member
				break
			}
		}
		if k.node == "" && time.Now().After(deadline) {
			k.err = errors.New("no member said it was the leader within " + leaderKillTimeout.String())
			return k
		}
		if k.node == "" {
			time.Sleep(500 * time.Millisecond)
		}
	}
	out, err := h.Exec(k.node, "sh", "-c", `pid=$(systemctl show -p MainPID --value quantykube-store); [ "${pid:-0}" != 0 ] && kill -9 "$pid" && echo "$pid"`)
	k.at, k.pid = time.Now(), strings.TrimSpace(out)
	if err != nil {
		k.err = fmt.Errorf("kill -9 of the leader on %s: %w: %s", k.node, err, k.pid)
		return k
	}
	deadline = time.Now().Add(leaderKillTimeout)
	for (k.elected == 0 || k.back == 0) && time.Now().Before(deadline) {
		if k.elected == 0 {
			for _, cp := range h.cps {
				if st, err := h.memberStatus(cp); cp != k.node && err == nil && st.IsLeader {
					k.elected, k.newLeader = time.Since(k.at), st.Member
				}
			}
		}
		if k.back == 0 {
			pid, _ := h.Exec(k.node, "systemctl", "show", "-p", "MainPID", "--value", "quantykube-store")
			if p := strings.TrimSpace(pid); p != k.pid && p != "0" && p != "" {
				if st, err := h.memberStatus(k.node); err == nil && st.Leader != "" {
					k.back = time.Since(k.at)
					if k.elected == 0 && st.IsLeader {
						// it came back and won the election before another
						// member was seen leading
						k.elected, k.newLeader = k.back, st.Member
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if k.elected == 0 || k.back == 0 {
		k.err = fmt.Errorf("after the kill of %s on %s: leader elected after %v, member back after %v (0: not within %v)",
			k.member, k.node, k.elected, k.back, leaderKillTimeout)
	}
	return k
}

func (k leaderKill) String() string {
	return fmt.Sprintf("the store's leader %s on %s (pid %s) killed with SIGKILL during %s; a new leader (%s) after %.1fs, its unit back by itself after %.1fs",
		k.member, k.node, k.pid, k.step, k.newLeader, k.elected.Seconds(), k.back.Seconds())
}
