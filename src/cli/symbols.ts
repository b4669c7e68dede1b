// `profcpu symbols`: not written yet.
import type { CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';

const command: CommandModule = {
  command: 'symbols',
  describe: '(not implemented yet)',
  handler: () => {
    throw new ProfcpuError('USAGE', '`profcpu symbols` is not implemented yet');
  },
};

export default command;
