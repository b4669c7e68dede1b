// `profcpu fold`: not written yet.
import type { CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';

const command: CommandModule = {
  command: 'fold',
  describe: '(not implemented yet)',
  handler: () => {
    throw new ProfcpuError('USAGE', '`profcpu fold` is not implemented yet');
  },
};

export default command;
