package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kvwire/kvwire/client"
)

// cmdDiag prints the client's diagnostics (SDK RFC 0034): every endpoint of
// every node, its state, sockets, local id and last activity, and the
// cluster's state; --wait first waits for the cluster to be ready.
func cmdDiag(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("diag")
	wait := fs.Duration("wait", 0, "first wait up to this long for every node to be connected (`DURATION`; 0: report at once)")
	degraded := fs.Bool("degraded", false, "with --wait, wait only until one node of each service is connected")
	return inv.withSession(ctx, fs, args, 0, 0, func([]string) (func(*session) int, error) {
		if *wait < 0 {
			return nil, fmt.Errorf("--wait %v: want a positive duration", *wait)
		}
		if *degraded && *wait == 0 {
			return nil, fmt.Errorf("--degraded says what --wait waits for: give --wait too")
		}
		return func(s *session) int {
			var waitErr error
			if *wait > 0 {
				o := &client.WaitUntilReadyOptions{Timeout: *wait}
				if *degraded {
					o.DesiredState = client.ClusterDegraded
				}
				waitErr = s.c.WaitUntilReady(ctx, o)
			}
			d := s.c.Diagnostics(nil)
			code := exitOK
			if !(d.State == client.ClusterOnline || *degraded && d.State == client.ClusterDegraded) {
				code = exitError
			}
			res := &jsonResult{Op: "diag", OK: code == exitOK}
			if waitErr != nil {
				code, res = inv.failure("", "diag", waitErr)
			}
			if !inv.g.json {
				printDiagnostics(inv, d)
				return code
			}
			raw, err := json.Marshal(d)
			if err != nil {
				return inv.fail("", "diag", err)
			}
			res.Diagnostics = raw
			inv.printJSON(res)
			return code
		}, nil
	})
}

// printDiagnostics prints a line per endpoint and the cluster's state.
func printDiagnostics(inv *invocation, d *client.DiagnosticsResult) {
	w := inv.env.stdout
	for _, e := range d.Endpoints {
		line := fmt.Sprintf("%-24s %-13s", e.ID, e.State)
		if e.State == client.EndpointConnected {
			line += fmt.Sprintf(" local %s  id %s", e.Local, e.LocalID)
		}
		if !e.LastActivity.IsZero() {
			line += fmt.Sprintf("  active %s ago", fmtDuration(d.At.Sub(e.LastActivity).Round(time.Microsecond)))
		}
		if e.Err != nil {
			line += "  " + inv.redact(e.Err.Error())
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "cluster %s (%d endpoints)\n", d.State, len(d.Endpoints))
}
