package standin

// The parts of the launch contracts a process test cannot reach cheaply: defaults (fixed ports
// may be taken on the test machine) and where each form looks for its key and load delay.

import (
	"testing"
)

func TestDefaultsAndKeySources(t *testing.T) {
	env := map[string]string{"VLLM_API_KEY": "from-env", "STANDIN_LOAD_SECONDS": "2.5"}
	getenv := func(name string) string { return env[name] }
	for _, tc := range []struct {
		argv []string
		want Launch
	}{
		{[]string{"/usr/local/bin/vllm", "serve", "m"}, Launch{Form: FormVLLMServe, Owner: "vllm",
			Model: "m", ServedModelName: "m", Host: "0.0.0.0", Port: 8000, APIKey: "from-env",
			LoadSeconds: 2.5, TerminationLog: "/dev/termination-log"}},
		{[]string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model=m", "--api-key", "flag",
			"--served-model-name", "s", "--standin-load-seconds", "0"}, Launch{Form: FormVLLMAPIServer,
			Owner: "vllm", Model: "m", ServedModelName: "s", Host: "0.0.0.0", Port: 8000, APIKey: "flag",
			TerminationLog: "/dev/termination-log"}},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "m"}, Launch{Form: FormSGLang,
			Owner: "sglang", Model: "m", ServedModelName: "m", Host: "127.0.0.1", Port: 30000,
			LoadSeconds: 2.5, TerminationLog: "/dev/termination-log"}},
		// A negative number is a value (argparse's rule), so "m" stays the one positional.
		{[]string{"vllm", "serve", "--seed", "-1", "m", "--enforce-eager"}, Launch{Form: FormVLLMServe,
			Owner: "vllm", Model: "m", ServedModelName: "m", Host: "0.0.0.0", Port: 8000,
			APIKey: "from-env", LoadSeconds: 2.5, TerminationLog: "/dev/termination-log"}},
	} {
		got, err := Parse(tc.argv, getenv)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v\nwant %+v", tc.argv, got, err, tc.want)
		}
	}
}
