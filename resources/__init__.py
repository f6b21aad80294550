"""Data shipped with memdesigner: device profiles, the design schema, examples, icons."""
