// Reads a report archive's ro-crate-metadata.json with the ro-crate
// library (not jupyter-agent's code) and prints what it finds as JSON.
// usage: node read_crate.js DIR   (DIR holds the unpacked archive)
'use strict';
// The library's context check would fetch the context over HTTP; tests
// send no traffic off this machine, and the library bundles the context.
globalThis.fetch = async () => {
  throw new Error('network is off in tests');
};
const fs = require('fs');
const path = require('path');
const { ROCrate, Validator } = require('ro-crate');

const dir = process.argv[2];
const data = JSON.parse(
  fs.readFileSync(path.join(dir, 'ro-crate-metadata.json'), 'utf8'));
async function main() {
const crate = new ROCrate(data, { array: true, link: true });
await crate.resolveContext(); // the bundled RO-Crate 1.2 context
const validator = new Validator(crate);
validator.rootDataEntity();
const ids = (list) => (list || []).map((e) => e['@id']);
const root = crate.rootDataset;
const action = crate.getEntity('#session');
const files = ids(root.hasPart).map((id) => {
  const e = crate.getEntity(id);
  return {
    id,
    type: e['@type'],
    sha256: (e.sha256 || [])[0],
    size: (e.contentSize || [])[0],
    exists: fs.existsSync(path.join(dir, id)),
  };
});
console.log(JSON.stringify({
  rootTypes: root['@type'],
  conformsTo: ids(root.conformsTo),
  errors: validator.results.filter((r) => r.status === 'error')
    .map((r) => r.message),
  files,
  action: action && {
    types: action['@type'],
    instrument: ids(action.instrument),
    object: ids(action.object),
    result: ids(action.result),
    startTime: action.startTime,
    endTime: action.endTime,
    status: ids(action.actionStatus),
  },
}));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
