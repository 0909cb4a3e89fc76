package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// shellWords splits a command line as a shell would for the plain cases
// the deploy files use: blanks, single quotes, backslash-newlines.
func shellWords(line string) []string {
	line = strings.ReplaceAll(line, "\\\n", " ")
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// sbatchDefault is the default the Slurm recipe gives variable name
// (name=${NAME:-DEFAULT}).
func sbatchDefault(t *testing.T, name string) string {
	data, err := os.ReadFile("../../scripts/deploy/slurm/sweep.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$\{` + name + `:-(.*?)\}\n`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("sweep.sbatch gives %s no default", name)
	}
	return string(m[1])
}

// TestDeployFilesParse: the tsock mount commands in scripts/deploy (the
// Kubernetes DaemonSet, the Slurm sweep) are ones this tsock accepts:
// every flag exists and every value parses, so a rename or a new check
// cannot leave the deployment files behind.
func TestDeployFilesParse(t *testing.T) {
	for _, tc := range []struct {
		file string
		re   *regexp.Regexp // the command, from "tsock mount" on
		vars *strings.Replacer
	}{
		{"../../scripts/deploy/kubernetes/tsock-daemonset.yaml", regexp.MustCompile(`(?s)exec (tsock mount .*?)\n\s+env:`), strings.NewReplacer("\n", " ")},
		// Its default TSOCK_ARGS, a --cache as "auto" sizes it, and the
		// node flag of a sweep's independent trials.
		{"../../scripts/deploy/slurm/sweep.sbatch", regexp.MustCompile(`\t(tsock mount "\$m" .*?) &\n`),
			strings.NewReplacer(`"$m"`, "/mnt/tsock", `"$3"`, "'s3://datasets/train-{000..009}.tar'",
				"$flags", "--cache 1GiB --cache-dir "+os.TempDir(), "$5", "--node 0/1", "$4", sbatchDefault(t, "TSOCK_ARGS"))},
	} {
		data, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		m := tc.re.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no tsock mount command", tc.file)
		}
		words := shellWords(tc.vars.Replace(string(m[1])))
		for i, w := range words {
			if rest, ok := strings.CutPrefix(w, "/var/cache/tsock"); ok {
				words[i] = os.TempDir() + rest // the node's disk; here, a directory that exists
			}
		}
		c := &mountCommand{}
		if err := c.Parse(words[2:]); err != nil {
			t.Errorf("%s: %q: %v", tc.file, words, err)
		}
		if c.cfg.Epochs != 0 || c.cacheSize == 0 {
			t.Errorf("%s: %q: want --epochs 0 and a --cache", tc.file, words)
		}
	}
}
