// Validates generated instances against their JSON schemas with ajv (the oracle the grammar tests
// did not write). Input file: JSON array of {schema, draft: "7" | "2020", instances: [text, ...]}.
// Prints a JSON array of failures {group, instance, why}; exit 0 when it could run at all.
'use strict';
const fs = require('fs');
const Ajv7 = require('ajv').default;
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

const groups = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const make = (Cls) => { const a = new Cls({ strict: false, validateFormats: true }); addFormats(a); return a; };
const failures = [];
let checked = 0;
groups.forEach((g, gi) => {
  const ajv = make(g.draft === '2020' ? Ajv2020 : Ajv7);
  let validate;
  try { validate = ajv.compile(g.schema); } catch (e) { failures.push({ group: gi, instance: null, why: 'ajv cannot compile: ' + e.message }); return; }
  for (const text of g.instances) {
    checked++;
    let value;
    try { value = JSON.parse(text); } catch (e) { failures.push({ group: gi, instance: text, why: 'not JSON: ' + e.message }); continue; }
    if (!validate(value)) failures.push({ group: gi, instance: text, why: ajv.errorsText(validate.errors) });
  }
});
process.stdout.write(JSON.stringify({ checked, failures }) + '\n');
