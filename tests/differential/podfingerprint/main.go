// Command podfingerprint prints the pods fingerprint that the pinned
// github.com/k8stopologyawareschedwg/podfingerprint module computes (v0.2.2, the version
// sigs.k8s.io/scheduler-plugins v0.34.7 builds its NodeResourceTopologyMatch cache with), so that
// numa.kube's own computation (plugins/module_utils/numa/podfingerprint.py) can be compared
// with it. The scheduler's cache resync signs the pods it sees on a node exactly this way
// (pkg/noderesourcetopology/cache/store.go, checkPodFingerprintForNode) and compares the result
// with the nodeTopologyPodsFingerprint attribute the node's publisher wrote.
//
// It reads one JSON request a line on stdin and writes one JSON answer a line on stdout:
//
//	{"id": 3, "pods": [["namespace", "name"], ...]}
//	{"id": 3, "fingerprint": "pfp0v001..."}
//
// With -names it prints instead, as one JSON object, the attribute names and the method values the
// module defines (the ones the scheduler's cache reads and compares: cache/store.go
// podFingerprintForNodeTopology), so that the text numa.kube writes is checked against them too.
//
// Build and run: see ../test_podfingerprint.py (the differential tier) and
// tests/unit/plugins/module_utils/podfingerprint-vectors.json (the vectors it printed).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/k8stopologyawareschedwg/podfingerprint"
)

type request struct {
	ID   int         `json:"id"`
	Pods [][2]string `json:"pods"`
}

type answer struct {
	ID          int    `json:"id"`
	Fingerprint string `json:"fingerprint"`
}

func main() {
	names := flag.Bool("names", false, "print the attribute names and method values, then exit")
	flag.Parse()
	if *names {
		err := json.NewEncoder(os.Stdout).Encode(map[string]string{
			"Attribute":                    podfingerprint.Attribute,
			"AttributeMethod":              podfingerprint.AttributeMethod,
			"MethodAll":                    podfingerprint.MethodAll,
			"MethodWithExclusiveResources": podfingerprint.MethodWithExclusiveResources,
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "podfingerprint: %v\n", err)
			os.Exit(1)
		}
		return
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "podfingerprint: a line that is not a request: %v\n", err)
			os.Exit(2)
		}
		fp := podfingerprint.NewFingerprint(len(req.Pods))
		for _, pod := range req.Pods {
			fp.Add(pod[0], pod[1])
		}
		if err := out.Encode(answer{ID: req.ID, Fingerprint: fp.Sign()}); err != nil {
			fmt.Fprintf(os.Stderr, "podfingerprint: %v\n", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "podfingerprint: reading stdin: %v\n", err)
		os.Exit(1)
	}
}
