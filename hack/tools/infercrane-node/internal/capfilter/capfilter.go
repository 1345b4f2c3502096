// Package capfilter takes out of an OCI runtime spec the capabilities that the calling
// process cannot grant, so that runc can start a privileged container on a machine whose
// capability bounding set lacks some of them.
//
// Why: a privileged container (Kind's nodes are) is given every capability the container
// engine knows. On a VM without CAP_SYS_RESOURCE in its bounding set, runc 1.1's capset then
// fails ("unable to apply caps: operation not permitted") and the container never starts;
// `--cap-drop` is ignored with `--privileged`. Dropping exactly what the bounding set lacks
// changes nothing else: those capabilities could never be held anyway.
//
// It only reads and rewrites the files runc is about to read; it never starts anything.
package capfilter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names lists the capabilities by number, as linux/capability.h numbers them.
var Names = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// Bounding reads the CapBnd mask from the text of /proc/<pid>/status.
func Bounding(status string) (uint64, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("CapBnd %q: %w", strings.TrimSpace(rest), err)
			}
			return mask, nil
		}
	}
	return 0, fmt.Errorf("no CapBnd line")
}

// Missing names the known capabilities that bounding lacks.
func Missing(bounding uint64) map[string]bool {
	missing := map[string]bool{}
	for number, name := range Names {
		if bounding&(1<<number) == 0 {
			missing[name] = true
		}
	}
	return missing
}

// SpecFile is a file runc reads a process's capabilities from, and where they are in it.
type SpecFile struct {
	Path string
	// InProcess: config.json nests them under "process"; a `runc exec --process` file is
	// the process object itself.
	InProcess bool
}

// SpecFiles names the files the runc command line args will read capabilities from:
// <bundle>/config.json for create and run (--bundle/-b), the --process/-p file of exec.
// A bundle runc would take from its working directory (no --bundle) is not covered:
// containerd's shim always passes one.
func SpecFiles(args []string) []SpecFile {
	var found []SpecFile
	for i := 0; i < len(args); i++ {
		flag, value, inline := strings.Cut(args[i], "=")
		if !inline {
			if i+1 >= len(args) {
				break
			}
			value = args[i+1]
		}
		switch flag {
		case "--bundle", "-b":
			found = append(found, SpecFile{Path: filepath.Join(value, "config.json"), InProcess: true})
		case "--process", "-p":
			found = append(found, SpecFile{Path: value})
		default:
			continue
		}
		if !inline {
			i++
		}
	}
	return found
}

// Filter removes the drop capabilities from every set (bounding, effective, inheritable,
// permitted, ambient) of the spec document doc. It returns the new document and whether
// anything was removed; numbers and unknown fields are kept as they were.
func Filter(doc []byte, drop map[string]bool, inProcess bool) ([]byte, bool, error) {
	decoder := json.NewDecoder(bytes.NewReader(doc))
	decoder.UseNumber() // uids, limits: never through float64
	var spec map[string]any
	if err := decoder.Decode(&spec); err != nil {
		return nil, false, err
	}
	process := spec
	if inProcess {
		nested, ok := spec["process"].(map[string]any)
		if !ok {
			return doc, false, nil
		}
		process = nested
	}
	sets, ok := process["capabilities"].(map[string]any)
	if !ok {
		return doc, false, nil
	}
	changed := false
	for name, set := range sets {
		listed, ok := set.([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(listed))
		for _, capability := range listed {
			if text, ok := capability.(string); ok && drop[text] {
				changed = true
				continue
			}
			kept = append(kept, capability)
		}
		sets[name] = kept
	}
	if !changed {
		return doc, false, nil
	}
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false) // strings exactly as they were: "<" stays "<"
	if err := encoder.Encode(spec); err != nil {
		return nil, false, err
	}
	return out.Bytes(), true, nil
}

// Apply filters every spec file of the runc command line args in place (atomically,
// keeping the file's mode), dropping what bounding lacks; files that need no change are
// not written.
func Apply(args []string, bounding uint64) error {
	drop := Missing(bounding)
	if len(drop) == 0 {
		return nil
	}
	for _, file := range SpecFiles(args) {
		if err := rewrite(file, drop); err != nil {
			return fmt.Errorf("%s: %w", file.Path, err)
		}
	}
	return nil
}

func rewrite(file SpecFile, drop map[string]bool) error {
	info, err := os.Stat(file.Path)
	if os.IsNotExist(err) {
		return nil // runc itself says what is missing
	}
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(file.Path)
	if err != nil {
		return err
	}
	filtered, changed, err := Filter(doc, drop, file.InProcess)
	if err != nil || !changed {
		return err
	}
	staged, err := os.CreateTemp(filepath.Dir(file.Path), ".capfilter-*")
	if err != nil {
		return err
	}
	defer os.Remove(staged.Name())
	if _, err := staged.Write(filtered); err != nil {
		staged.Close()
		return err
	}
	if err := staged.Chmod(info.Mode().Perm()); err != nil {
		staged.Close()
		return err
	}
	if err := staged.Close(); err != nil {
		return err
	}
	return os.Rename(staged.Name(), file.Path)
}
